// decode_traffic: classifies each checkpoint tensor by the module it belongs to.
#include "cli/bench_traffic.h"

namespace strata::cli {

DecodeTraffic decode_traffic(const model::ModelConfig& c,
                             const std::map<std::string, Tensor>& tensors, Device device) {
  DecodeTraffic t;
  for (const auto& [name, tensor] : tensors) {
    // The loader keeps packed codes as they are, on a GPU also the BF16/F16 scales and biases of
    // quantized matrices, and converts every other float tensor to F32.
    const bool kept = tensor.dtype == DType::kU32 ||
                      (device != Device::kCpu && (tensor.dtype == DType::kBF16 || tensor.dtype == DType::kF16) &&
                       (name.ends_with(".scales") || name.ends_with(".biases")));
    const double bytes = kept ? static_cast<double>(tensor.nbytes())
                              : static_cast<double>(tensor.numel()) * sizeof(float);
    t.weights_total += bytes;
    const std::string module = name.substr(0, name.rfind('.'));
    if (module.ends_with("embed_tokens")) {
      t.weights += bytes / static_cast<double>(
                               tensor.dim(0));  // one row (all rows of codes, scales, biases alike)
      if (c.tie_word_embeddings) t.weights += bytes;  // ... and the whole table as the lm_head
    } else if (module.find(".switch_mlp.") != std::string::npos ||
               module.find(".experts.") != std::string::npos) {
      t.weights +=
          bytes * static_cast<double>(c.moe.top_k) / static_cast<double>(c.moe.num_experts);
    } else {
      t.weights += bytes;
    }
  }
  int64_t attention_layers = 0, recurrent_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool attention =
        c.family == model::Family::kDense || c.layer_kinds[l] == model::LayerKind::kFullAttention;
    (attention ? attention_layers : recurrent_layers)++;
  }
  const double kv_row = 2.0 * static_cast<double>(c.num_kv_heads * c.head_dim) *
                        static_cast<double>(dtype_size(c.kv_cache_dtype));  // K and V
  t.kv_per_token = static_cast<double>(attention_layers) * kv_row;
  t.window = static_cast<double>(c.sliding_window);
  const model::LinearAttentionConfig& la = c.linear;
  const double recurrent = static_cast<double>(la.value_heads * la.value_dim * la.key_dim +
                                               (la.conv_kernel - 1) * la.conv_dim()) *
                           sizeof(float);
  t.fixed = static_cast<double>(attention_layers) * kv_row +
            2.0 * static_cast<double>(recurrent_layers) * recurrent;
  return t;
}

}  // namespace strata::cli
