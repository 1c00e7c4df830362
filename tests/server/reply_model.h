// ReplyModel: a model::Model whose "prediction" is a fixed reply after the prompt, so server tests know
// exactly what the engine generates (reasoning tags, tool calls, stop strings) through the real
// Engine and sampler. After the script it predicts `end_id` (EOS), or repeats `filler_id` forever
// when endless. `step_delay` slows each forward call, for queue and disconnect tests.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "model/model.h"

namespace strata::test {

class ReplyModel : public model::Model {
 public:
  struct Script {
    std::vector<int32_t> tokens;
    int32_t end_id = 0;
    bool endless = false;
    int32_t filler_id = 0;
    std::chrono::milliseconds step_delay{0};
  };

  ReplyModel(int64_t vocab_size, Script script) : script_(std::move(script)) {
    config_.vocab_size = vocab_size;
    config_.max_position_embeddings = 4096;
    fingerprint_ = "scripted";
  }

  model::ModelInfo info() const override {
    model::ModelInfo i;
    i.family = "scripted";
    return i;
  }

  model::ModelState new_state(int64_t capacity) const override {
    model::ModelState s;
    s.capacity = capacity;
    return s;
  }

  void forward(std::span<const int32_t> tokens, model::ModelState& state, const Tensor& logits,
               bool /*all_logits*/) override {
    if (script_.step_delay.count() > 0) std::this_thread::sleep_for(script_.step_delay);
    if (state.n_tokens == 0) prompt_length_ = static_cast<int64_t>(tokens.size());
    state.n_tokens += static_cast<int64_t>(tokens.size());
    const size_t generated = static_cast<size_t>(state.n_tokens - prompt_length_);
    int32_t next = script_.endless ? script_.filler_id : script_.end_id;
    if (generated < script_.tokens.size()) next = script_.tokens[generated];
    float* out = logits.as<float>();
    for (int64_t i = 0; i < config_.vocab_size; ++i) out[i] = 0.0f;
    out[next] = 100.0f;
  }

 private:
  Script script_;
  int64_t prompt_length_ = 0;  // the first forward call of a sequence is its whole prompt
};

}  // namespace strata::test
