// PCRE2 wrapper: compile with UTF + UCP, JIT-compile, and iterate over matches. When the JIT
// stack is too small for a pathological input, the match is retried by the interpreter.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>

#include <memory>

#include "core/error.h"
#include "text/unicode.h"

namespace strata::text {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code_ == nullptr) {
    fail(ErrorKind::kInvalidInput, "invalid regex '{}' at offset {}: {}", pattern, offset,
         pcre2_message(error));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::for_each_match(std::string_view text,
                           FunctionRef<void(size_t, size_t)> on_match) const {
  if (text.empty()) return;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
  if (!data) fail(ErrorKind::kInternal, "out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                    data.get(), nullptr)
                  : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       data.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      fail(ErrorKind::kInvalidInput, "regex '{}' failed on input: {}", pattern_, pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      on_match(begin, end);
      pos = end;
    } else {  // an empty match: step over one character, as Oniguruma's iterator does
      pos = begin + utf8_sequence_length(static_cast<uint8_t>(text[begin]));
    }
  }
}

}  // namespace strata::text
