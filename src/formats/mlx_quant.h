// MLX affine quantization (MODEL_SPEC.md §3): per group of `group_size` consecutive values in a row,
// w ≈ scale · q + bias with q ∈ [0, 2^bits − 1], q packed LSB-first into uint32 words. quantize()
// reproduces MLX's own quantizer bit for bit; dequantize() reproduces MLX's dequantize.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/tensor.h"

namespace strata::formats {

struct QuantParams {
  int bits = 4;
  int group_size = 64;
  bool operator==(const QuantParams&) const = default;
};

struct QuantizedMatrix {
  HostTensor weight;  // U32 [rows, cols * bits / 32]
  HostTensor scales;  // [rows, cols / group_size], the input's float dtype
  HostTensor biases;  // same
  QuantParams params;
};

bool is_supported_quant(const QuantParams& p);  // bits ∈ {2,3,4,5,6,8}, group ∈ {32,64,128}

// w: [rows, cols] F32/BF16/F16 with cols % group_size == 0.
QuantizedMatrix quantize_affine(const Tensor& w, QuantParams params);

// Dequantizes to `out_dtype` (F32/BF16/F16) [rows, cols]; with out_dtype equal to the scales' dtype
// this matches MLX's dequantize exactly.
HostTensor dequantize_affine(const Tensor& weight, const Tensor& scales, const Tensor& biases,
                             QuantParams params, DType out_dtype);

// Reads q (the unsigned code) of element `col` of a packed row.
inline uint32_t unpack_code(const uint32_t* row, int64_t col, int bits) {
  const uint64_t bit = static_cast<uint64_t>(col) * bits;
  const uint64_t word = bit >> 5;
  const uint32_t shift = bit & 31;
  uint64_t v = row[word] >> shift;
  if (shift + bits > 32) v |= static_cast<uint64_t>(row[word + 1]) << (32 - shift);
  return static_cast<uint32_t>(v) & ((1u << bits) - 1);
}

// The "quantization" section of an MLX config.json: defaults plus per-module overrides.
class QuantConfig {
 public:
  // From config.json (looks at "quantization", then "quantization_config"); empty when absent.
  static QuantConfig from_config(const Json& config);
  bool present() const { return present_; }
  QuantParams defaults() const { return defaults_; }
  // The params for a module path such as "model.layers.0.mlp.up_proj": the per-path entry when
  // there is one (nullopt when it says false), else the defaults.
  std::optional<QuantParams> for_module(const std::string& path) const;

 private:
  bool present_ = false;
  QuantParams defaults_;
  std::map<std::string, std::optional<QuantParams>> overrides_;
};

}  // namespace strata::formats
