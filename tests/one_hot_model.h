// OneHotModel: the base of the scripted test models (tests/runtime/scripted_model.h,
// tests/server/reply_model.h, tests/server/thinking_model.h): a vocabulary and no weights; each
// subclass decides the next token and writes it as one-hot logits, so tests drive the real Engine
// loop through exact token sequences.
#pragma once

#include <algorithm>
#include <string>

#include "model/model.h"

namespace strata::test {

class OneHotModel : public model::Model {
 public:
  OneHotModel(int64_t vocab_size, std::string fingerprint) {
    config_.model_type = "scripted";
    config_.vocab_size = vocab_size;
    config_.max_position_embeddings = 4096;
    fingerprint_ = std::move(fingerprint);
  }

  model::ModelInfo info() const override {
    model::ModelInfo i;
    i.family = "scripted";
    return i;
  }

 protected:
  // Logits row `row` of `logits`: `peak` at `id`, 0 elsewhere.
  void one_hot(const Tensor& logits, int64_t row, int32_t id, float peak) const {
    float* out = logits.as<float>() + row * config_.vocab_size;
    std::fill(out, out + config_.vocab_size, 0.0f);
    out[id] = peak;
  }
};

}  // namespace strata::test
