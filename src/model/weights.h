// WeightLoader: turns checkpoint tensors (safetensors: HF float or MLX-quantized; GGUF) into the
// backend's Weight views, converting float weights to F32 for the CPU and quantizing on load when
// asked (MLX affine, bit-exact with MLX's quantizer). It owns every converted buffer.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/memory.h"
#include "backend/weight.h"
#include "core/tensor.h"
#include "formats/gguf.h"
#include "formats/mlx_quant.h"
#include "formats/safetensors.h"

namespace strata::model {

// The KV cache's element type. kAuto follows the checkpoint, as vLLM's "auto" does: BF16 when
// config.json's dtype is bfloat16 or float16, F32 when it is float32; without one, BF16 when any
// tensor is BF16/F16 (MLX-quantized checkpoints: their scales); for a GGUF file, BF16 when any
// tensor is not F32 (llama.cpp caches in f16).
enum class KvCacheType { kAuto, kF32, kBF16 };
// "auto", "f32" or "bf16"; anything else is a kInvalidInput error naming `what`.
KvCacheType parse_kv_cache_type(std::string_view text, std::string_view what = "--kv-cache-type");
// A resolved KV cache dtype as the option spells it: "f32" or "bf16".
std::string_view kv_cache_type_name(DType dtype);

struct LoadOptions {
  std::optional<formats::QuantParams> quantize;  // quantize float matrices on load
  std::string config_override;                   // tests: load with this config.json text instead
  Device device = Device::kCpu;                  // where the weights are placed
  KvCacheType kv_cache = KvCacheType::kAuto;     // sets ModelConfig::kv_cache_dtype
  // Decode steps may be captured as device graphs and replayed (false: every step runs eagerly,
  // to compare; the cuda_graphs setting).
  bool cuda_graphs = true;
  // A shared expert of the routed experts' shape and format may run as one more routed expert
  // (false: on its own, to compare; the moe_fold_shared setting).
  bool moe_fold_shared = true;
};

class WeightLoader {
 public:
  // A safetensors checkpoint (directory or file) with its config.json's quantization section.
  WeightLoader(formats::WeightStore store, const Json& config, const LoadOptions& options);
  // A GGUF file.
  WeightLoader(std::shared_ptr<formats::GgufFile> gguf, const LoadOptions& options);

  bool is_gguf() const { return gguf_ != nullptr; }
  bool has(const std::string& name) const;
  // A matrix "prefix" ("model.layers.0.self_attn.q_proj"): reads prefix.weight (+ .scales/.biases
  // when MLX-quantized). Float matrices are quantized when LoadOptions asks and cols allow. Placed on
  // the device of LoadOptions, or kept on the host when it is only an input to select_rows().
  enum class Placement { kDevice, kHost };
  backend::Weight matrix(const std::string& prefix, bool allow_quantize = true,
                         Placement placement = Placement::kDevice);
  // A stack of E matrices in one tensor ([E, N, K]): `weight_name` (HF fused experts, e.g.
  // "...experts.gate_up_proj") or prefix.weight/.scales/.biases (MLX switch_mlp). One view each.
  std::vector<backend::Weight> stacked(const std::string& weight_name, const std::string& prefix,
                                       bool allow_quantize = true);
  // A copy of w (a host matrix) holding the given rows, in that order (reorders fused projections),
  // placed on the device.
  backend::Weight select_rows(const backend::Weight& w, std::span<const int64_t> rows);
  // One matrix of the rows of `parts` in turn (host matrices of one format and width; e.g. a router
  // and the shared expert's gate, so that one launch computes both), placed on the device.
  backend::Weight stack_rows(std::span<const backend::Weight> parts);
  // A host matrix (matrix(..., Placement::kHost)) on the device: uploaded and owned when that is
  // not the host.
  backend::Weight place(backend::Weight w);
  // A float tensor by full name, converted to F32, on the device.
  Tensor vector(const std::string& name);
  std::optional<Tensor> optional_vector(const std::string& name);

  int64_t parameter_count() const { return parameter_count_; }
  size_t weight_bytes() const { return weight_bytes_; }
  std::string quantization() const;  // "bf16", "mlx q4 g64", "q8 g64 (on load)", ...
  const formats::WeightStore* store() const { return store_ ? &*store_ : nullptr; }
  const formats::GgufFile* gguf() const { return gguf_.get(); }
  Device device() const { return options_.device; }
  const LoadOptions& options() const { return options_; }

 private:
  const Tensor& raw(const std::string& name);
  // prefix's weight (named weight_name) as one matrix: leading dims of a rank-`rank` tensor become rows.
  backend::Weight load_weight(const std::string& weight_name, const std::string& prefix, bool allow_quantize,
                              int rank);
  Tensor own_f32(const Tensor& t);
  Tensor own(HostTensor t);
  // The tensor on the model's device (uploaded and owned when that is not the host).
  Tensor place(const Tensor& t);

  std::optional<formats::WeightStore> store_;
  std::shared_ptr<formats::GgufFile> gguf_;
  formats::QuantConfig quant_config_;
  LoadOptions options_;
  std::vector<HostTensor> owned_;
  std::vector<backend::Buffer> placed_;
  std::vector<Tensor> gguf_views_;
  int64_t parameter_count_ = 0;
  size_t weight_bytes_ = 0;
  std::string source_dtype_;
  std::optional<formats::QuantParams> seen_quant_;
};

}  // namespace strata::model
