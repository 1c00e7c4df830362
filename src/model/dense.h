// The dense transformer family: Llama 2/3.x, Qwen2/2.5, Qwen3, Mistral, through one implementation
// driven by ModelConfig (GQA, optional q/k/v biases, optional per-head q/k RMSNorm, RoPE scaling,
// tied or untied output head, sliding window).
#pragma once

#include <memory>

#include "model/model.h"

namespace strata::model {

std::unique_ptr<Model> make_dense_model(ModelConfig config, std::unique_ptr<WeightLoader> weights,
                                        std::string fingerprint);

}  // namespace strata::model
