// A drafter for speculative-decoding tests: it proposes a known continuation of the prompt.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/speculative.h"

namespace strata::test {

// Drafts from a known continuation of the prompt: exactly the plain run's tokens (shift 0: every
// draft is accepted), or each of them plus `shift` (every draft is rejected).
class ScriptDrafter final : public runtime::Drafter {
 public:
  ScriptDrafter(size_t prompt_len, std::vector<int32_t> want, int32_t shift, int64_t vocab)
      : prompt_len_(prompt_len), want_(std::move(want)), shift_(shift), vocab_(vocab) {}
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override {
    out.clear();
    const size_t emitted = history.size() - prompt_len_;
    for (size_t j = 0; static_cast<int64_t>(j) < max && emitted + j < want_.size(); ++j)
      out.push_back(static_cast<int32_t>((want_[emitted + j] + shift_) % vocab_));
  }

 private:
  size_t prompt_len_;
  std::vector<int32_t> want_;
  int32_t shift_;
  int64_t vocab_;
};

}  // namespace strata::test
