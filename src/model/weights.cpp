// WeightLoader implementation.
#include "model/weights.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace strata::model {

WeightLoader::WeightLoader(formats::WeightStore store, const Json& config, const LoadOptions& options)
    : store_(std::move(store)), quant_config_(formats::QuantConfig::from_config(config)), options_(options) {}

WeightLoader::WeightLoader(std::shared_ptr<formats::GgufFile> gguf, const LoadOptions& options)
    : gguf_(std::move(gguf)), options_(options) {}

bool WeightLoader::has(const std::string& name) const {
  if (gguf_) return gguf_->find(name) != nullptr;
  return store_->contains(name);
}

const Tensor& WeightLoader::raw(const std::string& name) {
  if (gguf_) {
    const auto* info = gguf_->find(name);
    check(info != nullptr, ErrorKind::kNotFound, "{}: tensor '{}' is missing", gguf_->path(), name);
    owned_.push_back(gguf_->to_f32(*info));
    gguf_views_.push_back(owned_.back().view());
    if (source_dtype_.empty()) source_dtype_ = std::string(formats::ggml_type_name(info->type));
    return gguf_views_.back();
  }
  const Tensor& t = store_->get(name);
  if (source_dtype_.empty() && is_float(t.dtype) && t.rank() == 2) source_dtype_ = dtype_name(t.dtype);
  return t;
}

Tensor WeightLoader::own(HostTensor t) {
  owned_.push_back(std::move(t));
  return owned_.back().view();
}

Tensor WeightLoader::own_f32(const Tensor& t) {
  if (t.dtype == DType::kF32 && gguf_) return t;  // already converted and owned
  check(is_float(t.dtype), ErrorKind::kInvalidInput, "tensor of dtype {} where a float tensor was expected",
        dtype_name(t.dtype));
  return own(to_f32(t));
}

backend::Weight WeightLoader::matrix(const std::string& prefix, bool allow_quantize) {
  backend::Weight w;
  const std::string weight_name = prefix + ".weight";
  if (!gguf_ && store_->contains(prefix + ".scales")) {
    const Tensor& codes = store_->get(weight_name);
    const Tensor& scales = store_->get(prefix + ".scales");
    const Tensor& biases = store_->get(prefix + ".biases");
    check(codes.dtype == DType::kU32 && codes.rank() == 2 && scales.rank() == 2 && scales.shape == biases.shape &&
              scales.dim(0) == codes.dim(0),
          ErrorKind::kInvalidInput, "{}: malformed quantized tensor (weight {} {}, scales {})", prefix,
          dtype_name(codes.dtype), codes.shape.str(), scales.shape.str());
    std::optional<formats::QuantParams> params = quant_config_.for_module(prefix);
    check(params.has_value(), ErrorKind::kInvalidInput,
          "{}: has scales but config.json has no quantization parameters for it", prefix);
    const int64_t cols = codes.dim(1) * 32 / params->bits;
    check(codes.dim(1) * 32 % params->bits == 0 && cols == scales.dim(1) * params->group_size,
          ErrorKind::kInvalidInput, "{}: packed shape {} does not match bits {} group {} and scales {}", prefix,
          codes.shape.str(), params->bits, params->group_size, scales.shape.str());
    // Mapped data sits wherever the file put it (safetensors headers need not pad to 4 bytes):
    // copy the codes when they are not aligned for uint32 reads.
    if (reinterpret_cast<uintptr_t>(codes.data) % alignof(uint32_t) != 0) {
      HostTensor aligned(codes.dtype, codes.shape);
      std::memcpy(aligned.as<void>(), codes.data, codes.nbytes());
      w.w = own(std::move(aligned));
    } else {
      w.w = codes;
    }
    w.scales = own_f32(scales);
    w.biases = own_f32(biases);
    w.bits = params->bits;
    w.group_size = params->group_size;
    seen_quant_ = params;
  } else {
    const Tensor& t = raw(weight_name);
    check(t.rank() == 2, ErrorKind::kInvalidInput, "{}: expected a matrix, got shape {}", weight_name,
          t.shape.str());
    if (options_.quantize && allow_quantize && t.dim(1) % options_.quantize->group_size == 0) {
      formats::QuantizedMatrix q = formats::quantize_affine(t, *options_.quantize);
      w.bits = q.params.bits;
      w.group_size = q.params.group_size;
      w.scales = own_f32(q.scales.view());
      w.biases = own_f32(q.biases.view());
      w.w = own(std::move(q.weight));
    } else {
      w.w = own_f32(t);
    }
  }
  parameter_count_ += w.rows() * w.cols();
  weight_bytes_ += w.nbytes();
  return w;
}

Tensor WeightLoader::vector(const std::string& name) {
  const Tensor& t = raw(name);
  Tensor v = own_f32(t);
  parameter_count_ += v.numel();
  weight_bytes_ += v.nbytes();
  return v;
}

std::optional<Tensor> WeightLoader::optional_vector(const std::string& name) {
  if (!has(name)) return std::nullopt;
  return vector(name);
}

std::string WeightLoader::quantization() const {
  if (options_.quantize)
    return fmt::format("q{} g{} (quantized on load from {})", options_.quantize->bits, options_.quantize->group_size,
                       source_dtype_.empty() ? "float" : source_dtype_);
  if (seen_quant_) return fmt::format("mlx q{} g{}", seen_quant_->bits, seen_quant_->group_size);
  return source_dtype_.empty() ? "float" : source_dtype_;
}

}  // namespace strata::model
