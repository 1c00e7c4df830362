// RoPE frequencies for every scaling type in ModelConfig, computed as transformers computes them
// (float32 arithmetic), so logits match its references.
#pragma once

#include "backend/ops.h"
#include "model/config.h"

namespace strata::model {

// seq_len matters only for "dynamic" (NTK) scaling, whose base grows past the trained length.
backend::RopeParams make_rope_params(const ModelConfig& cfg, int64_t seq_len);

}  // namespace strata::model
