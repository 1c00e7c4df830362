// Regex: a compiled PCRE2 pattern (UTF-8, Unicode properties, JIT when available) used by the
// Split pre-tokenizer and the Replace normalizer. Patterns come from tokenizer.json files written
// for Oniguruma; the constructs they use (lookahead, \p{..}, (?i:..)) mean the same in PCRE2.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/function_ref.h"

struct pcre2_real_code_8;

namespace strata::text {

using ByteRange = std::pair<size_t, size_t>;  // [begin, end) byte offsets

class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws Error(kInvalidInput) naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for every non-overlapping, non-empty match of `text` (valid
  // UTF-8), left to right.
  void for_each_match(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;
  void find_all(std::string_view text, std::vector<ByteRange>& matches) const {
    for_each_match(text, [&](size_t begin, size_t end) { matches.emplace_back(begin, end); });
  }

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace strata::text
