// ThinkingModel: a scripted thinking model for think-control tests through the server. Unlike
// ReplyModel it reacts to what it is fed, as a real model would after strata closes its thinking:
// it thinks `thinking`, then `loop` over and over (or closes with </think> itself when `loop` is
// empty), and once a </think> has been fed to it (its own or one strata injected, hint and all) it
// answers `answer` and ends with `end_id`. Logits are one-hot (100 at the chosen id). The first
// forward call of a sequence must be its whole prompt (prefill_chunk >= the prompt).
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "one_hot_model.h"

namespace strata::test {

class ThinkingModel : public OneHotModel {
 public:
  struct Script {
    std::vector<int32_t> thinking;  // starts with <think> for models that open their own block
    std::vector<int32_t> loop;      // repeated forever after `thinking` when not empty
    std::vector<int32_t> answer;
    int32_t close_id = 0;
    int32_t end_id = 0;
  };

  ThinkingModel(int64_t vocab_size, Script script)
      : OneHotModel(vocab_size, "scripted-thinking"), script_(std::move(script)) {}

  model::ModelState new_state(int64_t capacity) const override {
    model::ModelState s;
    s.capacity = capacity;
    return s;
  }

  void forward(std::span<const int32_t> tokens, model::ModelState& state, const Tensor& logits,
               bool /*all_logits*/) override {
    if (state.n_tokens == 0) {  // the prompt
      generated_ = 0;
      calls_ = 0;
      answer_from_ = -1;
    } else {
      generated_ += tokens.size();
      ++calls_;
      if (answer_from_ < 0 &&
          std::find(tokens.begin(), tokens.end(), script_.close_id) != tokens.end())
        answer_from_ = calls_;
    }
    state.n_tokens += static_cast<int64_t>(tokens.size());
    one_hot(logits, 0, next(), 100.0f);
  }

 private:
  int32_t next() const {
    const Script& s = script_;
    if (answer_from_ >= 0) {
      const size_t k = static_cast<size_t>(calls_ - answer_from_);
      return k < s.answer.size() ? s.answer[k] : s.end_id;
    }
    if (generated_ < s.thinking.size()) return s.thinking[generated_];
    if (s.loop.empty()) return s.close_id;
    return s.loop[(generated_ - s.thinking.size()) % s.loop.size()];
  }

  Script script_;
  size_t generated_ = 0;      // tokens fed after the prompt
  int64_t calls_ = 0;         // forward calls after the prompt
  int64_t answer_from_ = -1;  // the call that fed </think>
};

}  // namespace strata::test
