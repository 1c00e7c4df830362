// Speculative-decoding test helpers shared by the CPU and CUDA suites: a drafter that proposes a
// known continuation, and the check that verify rows are one-token steps.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/model.h"
#include "runtime/sequence.h"
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

// A verify step of T made-up tokens after `prompt` gives, row by row, the logits of one-token steps
// bit for bit; keeping any n of its rows leaves the state of n plain steps (the same tokens, and the
// same logits for a next token).
inline void check_verify_rows(model::Model& m, std::span<const int32_t> prompt, int64_t T) {
  const int64_t V = m.config().vocab_size;
  const auto row_bytes = static_cast<size_t>(V) * sizeof(float);
  std::vector<int32_t> tokens;
  for (int64_t t = 0; t < T; ++t) tokens.push_back(static_cast<int32_t>((t * 37 + 11) % V));
  const int32_t next = 5;
  for (int64_t n = 1; n <= T; ++n) {
    runtime::Sequence plain(m, 64), spec(m, 64);
    HostTensor logits(DType::kF32, {V}), rows(DType::kF32, {T, V});
    plain.forward(m, prompt, logits.view(), false);
    spec.forward(m, prompt, logits.view(), false);
    runtime::VerifySlots slots(spec, T);
    slots.forward(m, spec, tokens, rows.view());
    for (int64_t t = 0; t < n; ++t) {
      plain.forward(m, std::span<const int32_t>(&tokens[static_cast<size_t>(t)], 1), logits.view(), false);
      EXPECT_EQ(0, std::memcmp(logits.as<float>(), rows.as<float>() + t * V, row_bytes)) << "row " << t;
    }
    slots.keep(spec, n);
    EXPECT_EQ(spec.n_tokens(), plain.n_tokens());
    EXPECT_EQ(spec.tokens(), plain.tokens());
    HostTensor a(DType::kF32, {V}), b(DType::kF32, {V});
    plain.forward(m, std::span<const int32_t>(&next, 1), a.view(), false);
    spec.forward(m, std::span<const int32_t>(&next, 1), b.view(), false);
    EXPECT_EQ(0, std::memcmp(a.as<float>(), b.as<float>(), row_bytes)) << "after keeping " << n << " of " << T;
  }
}

}  // namespace strata::test
