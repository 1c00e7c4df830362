// The Qwen3.5 hybrid family: Qwen3.5 (dense FFN), Qwen3.5-MoE and Qwen3-Next. Gated DeltaNet layers
// (a causal conv window and an fp32 recurrent state) alternate with gated full-attention layers,
// from HF checkpoints (raw, 1-centred norms) or MLX conversions (shifted norms, quantized).
#pragma once

#include <memory>

#include "model/model.h"

namespace strata::model {

std::unique_ptr<Model> make_qwen35_model(ModelConfig config, std::unique_ptr<WeightLoader> weights,
                                         std::string fingerprint);

// The per-sequence state of a hybrid model: per attention layer a KV cache of `capacity` tokens
// ("layers.N.k"/"layers.N.v", [capacity, Hkv, D] of config.kv_cache_dtype); per GDN layer the conv
// window ("layers.N.conv", [Kc-1, conv_dim]) and the recurrent state ("layers.N.ssm", [Hv, dv, dk],
// fp32). Needs only the config, so benchmarks can size a state without weights.
ModelState make_hybrid_state(const ModelConfig& config, int64_t capacity, Device device = Device::kCpu);

}  // namespace strata::model
