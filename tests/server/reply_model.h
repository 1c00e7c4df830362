// ReplyModel: a model::Model whose "prediction" is a fixed reply after the prompt, so server tests know
// exactly what the engine generates (reasoning tags, tool calls, stop strings) through the real
// Engine and sampler. After the script it predicts `end_id` (EOS), or repeats `filler_id` forever
// when endless. `step_delay` slows each forward call, for queue and disconnect tests; `fail` makes
// the first step after the prompt throw, as an engine failure would.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "one_hot_model.h"

namespace strata::test {

class ReplyModel : public OneHotModel {
 public:
  struct Script {
    std::vector<int32_t> tokens;
    int32_t end_id = 0;
    bool endless = false;
    int32_t filler_id = 0;
    std::chrono::milliseconds step_delay{0};
    bool fail = false;
  };

  ReplyModel(int64_t vocab_size, Script script) : OneHotModel(vocab_size, "scripted"), script_(std::move(script)) {}

  model::ModelState new_state(int64_t capacity) const override {
    model::ModelState s;
    s.capacity = capacity;
    return s;
  }

  void forward(std::span<const int32_t> tokens, model::ModelState& state, const Tensor& logits,
               bool /*all_logits*/) override {
    if (script_.step_delay.count() > 0) std::this_thread::sleep_for(script_.step_delay);
    if (state.n_tokens == 0) prompt_length_ = static_cast<int64_t>(tokens.size());
    if (script_.fail && state.n_tokens > 0) throw Error(ErrorKind::kInternal, "scripted failure");
    state.n_tokens += static_cast<int64_t>(tokens.size());
    const size_t generated = static_cast<size_t>(state.n_tokens - prompt_length_);
    int32_t next = script_.endless ? script_.filler_id : script_.end_id;
    if (generated < script_.tokens.size()) next = script_.tokens[generated];
    one_hot(logits, 0, next, 100.0f);
  }

 private:
  Script script_;
  int64_t prompt_length_ = 0;  // the first forward call of a sequence is its whole prompt
};

}  // namespace strata::test
