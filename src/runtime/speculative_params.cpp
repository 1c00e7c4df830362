// The speculative methods' names.
#include "runtime/speculative_params.h"

#include "core/error.h"

namespace strata::runtime {

const char* speculative_method_name(SpeculativeParams::Method method) {
  switch (method) {
    case SpeculativeParams::Method::kNgram:
      return "ngram";
    case SpeculativeParams::Method::kDraft:
      return "draft";
    case SpeculativeParams::Method::kSelf:
      return "self";
    case SpeculativeParams::Method::kCustom:
      return "custom";
    case SpeculativeParams::Method::kOff:
      return "off";
    case SpeculativeParams::Method::kDefault:
      return "default";
  }
  return "off";
}

SpeculativeParams::Method parse_speculative_method(const std::string& name) {
  if (name == "ngram") return SpeculativeParams::Method::kNgram;
  if (name == "draft") return SpeculativeParams::Method::kDraft;
  if (name == "self") return SpeculativeParams::Method::kSelf;
  if (name == "off" || name == "none") return SpeculativeParams::Method::kOff;
  fail(ErrorKind::kInvalidInput, "unknown speculative method '{}' (ngram, draft, self or off)",
       name);
}

}  // namespace strata::runtime
