// Field access for tokenizer.json component specs: every accessor names the component and field
// in its error, so a malformed file fails with a message that points at the problem.
#pragma once

#include <string>
#include <string_view>

#include "core/json.h"

namespace strata::text {

const Json& spec_field(const Json& spec, const char* key);  // required; throws kInvalidInput
std::string spec_type(const Json& spec, const char* what);  // spec["type"], spec must be an object
std::string spec_string(const Json& spec, const char* key);
std::string spec_string_or(const Json& spec, const char* key, std::string fallback);
bool spec_bool_or(const Json& spec, const char* key, bool fallback);
int64_t spec_int_or(const Json& spec, const char* key, int64_t fallback);
// A single-character field (Metaspace "replacement", Strip "content") as UTF-8.
std::string spec_char(const Json& spec, const char* key, std::string_view fallback);

// A {"String": s} or {"Regex": r} pattern object: true and the regex for Regex.
struct PatternSpec {
  bool is_regex = false;
  std::string text;
};
PatternSpec spec_pattern(const Json& spec, const char* key);

}  // namespace strata::text
