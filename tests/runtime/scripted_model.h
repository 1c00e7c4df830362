// ScriptedModel: a test model whose next token is chosen by a script from every token consumed so
// far (its logits are one-hot: 10 at the chosen id, 0 elsewhere). Generation-control tests use it
// to drive the real Engine loop through exact token sequences (loops, budgets, injections).
#pragma once

#include <algorithm>
#include <functional>
#include <span>
#include <vector>

#include "core/error.h"
#include "one_hot_model.h"
#include "runtime/engine.h"

namespace strata::test {

class ScriptedModel final : public OneHotModel {
 public:
  using Script = std::function<int32_t(std::span<const int32_t> consumed)>;

  // recurrent: the state also holds a buffer that is not token-indexed (as a hybrid model's), so
  // that sequences of this model cannot be truncated.
  ScriptedModel(int64_t vocab, Script script, bool recurrent = false)
      : OneHotModel(vocab, "scripted-model"), script_(std::move(script)), recurrent_(recurrent) {}

  // The consumed tokens are the state: one token-indexed I32 buffer.
  model::ModelState new_state(int64_t capacity) const override {
    model::ModelState s;
    s.capacity = capacity;
    s.buffers.push_back({"tokens", backend::Buffer(Device::kCpu, DType::kI32, {capacity, 1}), true});
    if (recurrent_) s.buffers.push_back({"recurrent", backend::Buffer(Device::kCpu, DType::kF32, {1}), false});
    return s;
  }

  void forward(std::span<const int32_t> tokens, model::ModelState& state, const Tensor& logits,
               bool all_logits) override {
    const int64_t T = static_cast<int64_t>(tokens.size());
    check(state.n_tokens + T <= state.capacity, ErrorKind::kInvalidInput, "context overflow");
    int32_t* seen = state.buffers[0].tensor.as<int32_t>();
    std::copy(tokens.begin(), tokens.end(), seen + state.n_tokens);
    for (int64_t t = all_logits ? 0 : T - 1; t < T; ++t) {
      const int64_t consumed = state.n_tokens + t + 1;
      one_hot(logits, all_logits ? t : 0, script_(std::span<const int32_t>(seen, static_cast<size_t>(consumed))), 10.0f);
    }
    state.n_tokens += T;
    ++forward_calls_;
  }

  int64_t forward_calls() const { return forward_calls_; }

 private:
  Script script_;
  bool recurrent_ = false;
  int64_t forward_calls_ = 0;
};

// A greedy request for a scripted model: the one-token prompt {1}, ending at `eos`, under
// `controller`.
inline runtime::GenerationRequest controlled_request(runtime::TokenController* controller,
                                                     int64_t max_tokens, int32_t eos) {
  runtime::GenerationRequest req;
  req.prompt = {1};
  req.sampling.temperature = 0.0f;
  req.stop_ids = {eos};
  req.controller = controller;
  req.max_tokens = max_tokens;
  return req;
}

}  // namespace strata::test
