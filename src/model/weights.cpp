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

Tensor WeightLoader::place(const Tensor& t) {
  if (t.device == options_.device || t.empty()) return t;
  placed_.emplace_back(options_.device, t.dtype, t.shape);
  backend::copy(t, placed_.back().view());
  return placed_.back().view();
}

backend::Weight WeightLoader::place(backend::Weight w) {
  w.w = place(w.w);
  w.scales = place(w.scales);
  w.biases = place(w.biases);
  return w;
}

backend::Weight WeightLoader::matrix(const std::string& prefix, bool allow_quantize, Placement placement) {
  backend::Weight w = load_weight(prefix + ".weight", prefix, allow_quantize, 2);
  return placement == Placement::kDevice ? place(w) : w;
}

std::vector<backend::Weight> WeightLoader::stacked(const std::string& weight_name, const std::string& prefix,
                                                   bool allow_quantize) {
  check(!gguf_, ErrorKind::kUnsupported, "stacked expert tensors are not supported in GGUF files");
  const int64_t experts = store_->get(weight_name).dim(0);
  backend::Weight all = place(load_weight(weight_name, prefix, allow_quantize, 3));
  const int64_t n = all.rows() / experts;
  std::vector<backend::Weight> out;
  for (int64_t e = 0; e < experts; ++e) {
    backend::Weight w = all;
    w.w = all.w.rows(e * n, (e + 1) * n);
    if (all.quantized()) {
      w.scales = all.scales.rows(e * n, (e + 1) * n);
      w.biases = all.biases.rows(e * n, (e + 1) * n);
    }
    out.push_back(w);
  }
  return out;
}

backend::Weight WeightLoader::select_rows(const backend::Weight& w, std::span<const int64_t> rows) {
  check(w.w.device == Device::kCpu, ErrorKind::kInternal, "select_rows: the source matrix must be on the host");
  auto pick = [&](const Tensor& t) {
    const int64_t n = static_cast<int64_t>(rows.size());
    HostTensor out(t.dtype, {n, t.dim(1)});
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
    for (int64_t i = 0; i < n; ++i) {
      check(rows[i] >= 0 && rows[i] < t.dim(0), ErrorKind::kInternal, "select_rows: row {} of {}", rows[i], t.dim(0));
      std::memcpy(static_cast<char*>(out.as<void>()) + i * row_bytes,
                  static_cast<const char*>(t.data) + rows[i] * row_bytes, row_bytes);
    }
    return own(std::move(out));
  };
  backend::Weight out = w;
  out.w = pick(w.w);
  if (w.quantized()) {
    out.scales = pick(w.scales);
    out.biases = pick(w.biases);
  }
  return place(out);
}

backend::Weight WeightLoader::stack_rows(std::span<const backend::Weight> parts) {
  check(!parts.empty(), ErrorKind::kInternal, "stack_rows: no matrices");
  const backend::Weight& first = parts[0];
  int64_t rows = 0;
  for (const backend::Weight& w : parts) {
    check(w.w.device == Device::kCpu && backend::same_format(w, first) && w.cols() == first.cols(),
          ErrorKind::kInternal, "stack_rows: the matrices differ in place, format or width");
    rows += w.rows();
  }
  auto stack = [&](const Tensor backend::Weight::*part) {
    const Tensor& t0 = first.*part;
    HostTensor out(t0.dtype, {rows, t0.dim(1)});
    char* dst = static_cast<char*>(out.as<void>());
    for (const backend::Weight& w : parts) {
      std::memcpy(dst, (w.*part).data, (w.*part).nbytes());
      dst += (w.*part).nbytes();
    }
    return own(std::move(out));
  };
  backend::Weight out = first;
  out.w = stack(&backend::Weight::w);
  if (first.quantized()) {
    out.scales = stack(&backend::Weight::scales);
    out.biases = stack(&backend::Weight::biases);
  }
  return place(out);
}

backend::Weight WeightLoader::load_weight(const std::string& weight_name, const std::string& prefix,
                                          bool allow_quantize, int rank) {
  backend::Weight w;
  auto flatten = [](const Tensor& t) { return t.reshaped({t.numel() / t.dim(-1), t.dim(-1)}); };
  if (!gguf_ && store_->contains(prefix + ".scales")) {
    const Tensor& codes = store_->get(weight_name);
    const Tensor& scales = store_->get(prefix + ".scales");
    const Tensor& biases = store_->get(prefix + ".biases");
    check(codes.dtype == DType::kU32 && codes.rank() == rank && scales.rank() == rank && scales.shape == biases.shape &&
              scales.numel() / scales.dim(-1) == codes.numel() / codes.dim(-1),
          ErrorKind::kInvalidInput, "{}: malformed quantized tensor (weight {} {}, scales {})", prefix,
          dtype_name(codes.dtype), codes.shape.str(), scales.shape.str());
    std::optional<formats::QuantParams> params = quant_config_.for_module(prefix);
    check(params.has_value(), ErrorKind::kInvalidInput,
          "{}: has scales but config.json has no quantization parameters for it", prefix);
    const int64_t cols = codes.dim(-1) * 32 / params->bits;
    check(codes.dim(-1) * 32 % params->bits == 0 && cols == scales.dim(-1) * params->group_size,
          ErrorKind::kInvalidInput, "{}: packed shape {} does not match bits {} group {} and scales {}", prefix,
          codes.shape.str(), params->bits, params->group_size, scales.shape.str());
    // Mapped data sits wherever the file put it (safetensors headers need not pad to 4 bytes):
    // copy the codes when they are not aligned for uint32 reads.
    if (reinterpret_cast<uintptr_t>(codes.data) % alignof(uint32_t) != 0) {
      HostTensor aligned(codes.dtype, codes.shape);
      std::memcpy(aligned.as<void>(), codes.data, codes.nbytes());
      w.w = flatten(own(std::move(aligned)));
    } else {
      w.w = flatten(codes);
    }
    // The CPU ops read F32 scales and biases; the GPU kernels read the checkpoint's BF16/F16 as they
    // are (half the bytes per decode step).
    const bool keep = options_.device != Device::kCpu && scales.dtype == biases.dtype &&
                      (scales.dtype == DType::kBF16 || scales.dtype == DType::kF16);
    w.scales = flatten(keep ? scales : own_f32(scales));
    w.biases = flatten(keep ? biases : own_f32(biases));
    w.bits = params->bits;
    w.group_size = params->group_size;
    seen_quant_ = params;
  } else {
    const Tensor& t = raw(weight_name);
    check(t.rank() == rank, ErrorKind::kInvalidInput, "{}: expected a rank-{} tensor, got shape {}", weight_name,
          rank, t.shape.str());
    if (options_.quantize && allow_quantize && t.dim(-1) % options_.quantize->group_size == 0) {
      formats::QuantizedMatrix q = formats::quantize_affine(t, *options_.quantize);
      w.bits = q.params.bits;
      w.group_size = q.params.group_size;
      w.scales = flatten(own_f32(q.scales.view()));
      w.biases = flatten(own_f32(q.biases.view()));
      w.w = flatten(own(std::move(q.weight)));
    } else {
      w.w = flatten(own_f32(t));
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
  return place(v);
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
