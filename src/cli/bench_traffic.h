// What one decode step moves through device memory, for the bandwidth columns of strata bench:
// the weights it reads (as the loader places them), the KV cache it attends over, and the recurrent
// state it reads and rewrites.
#pragma once

#include <algorithm>
#include <map>
#include <string>

#include "core/tensor.h"
#include "model/config.h"

namespace strata::cli {

struct DecodeTraffic {
  double weights = 0;        // weight bytes read per decode token
  double weights_total = 0;  // every weight as placed on the device (ModelInfo::weight_bytes)
  double kv_per_token = 0;   // KV bytes read per token of context, all attention layers together
  double fixed = 0;   // per step: recurrent state read + written, the new token's K and V written
  double window = 0;  // sliding-window span (0: attention reads the whole context)

  // Bytes moved by a step that attends over `context` tokens.
  double at_context(double context) const {
    return weights + kv_per_token * (window > 0 ? std::min(context, window) : context) + fixed;
  }
};

// tensors: the checkpoint (names, dtypes and shapes; not read). Placed on the device, quantized
// codes keep their size, and so do BF16/F16 scales and biases on a GPU (`device`); everything
// else is F32. A decode step reads
// every weight once except the embedding table (one row; tied, it is also the lm_head and counts
// whole) and the routed experts (top_k of num_experts; the router and the shared expert count
// whole). Caches are F32. Activations and logits (under 0.1% of the total for the real shapes) are
// left out.
DecodeTraffic decode_traffic(const model::ModelConfig& config,
                             const std::map<std::string, Tensor>& tensors, Device device);

}  // namespace strata::cli
