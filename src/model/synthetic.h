// Random-weight checkpoints of any supported config, built in memory: MLX-quantized matrices
// (random codes, with scales and biases that keep activations in a sane range) under the tensor
// names the loaders read, so benchmarks and tests get real shapes without a download or a file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/tensor.h"

namespace strata::model {

struct SyntheticOptions {
  int bits = 4;  // 4 or 8 (any MLX width whose packing fills whole uint32 words works)
  int group_size = 64;
  uint64_t seed = 1;
};

// Load with load_model(checkpoint.config, formats::WeightStore::from_tensors(checkpoint.tensors)).
struct SyntheticCheckpoint {
  Json config;                            // the given config plus its MLX quantization section
  std::map<std::string, Tensor> tensors;  // views into `memory`, which must outlive the model
  std::vector<std::shared_ptr<void>> memory;
  size_t nbytes = 0;  // all tensors together
};

// config: a config.json object of any family parse_model_config accepts. Dense families use the
// Hugging Face names (model.layers.N...); the Qwen3.5 hybrids the MLX conversion's (language_model.
// model..., stacked switch_mlp experts, [C, K, 1] conv, norms already shifted), with MoE routers
// at 8 bits as mlx-lm quantizes them. Every matrix is quantized; norms are near 1.
SyntheticCheckpoint make_synthetic_checkpoint(const Json& config,
                                              const SyntheticOptions& options = {});

}  // namespace strata::model
