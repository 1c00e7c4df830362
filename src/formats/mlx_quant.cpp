// MLX affine quantization and dequantization, following MLX's CPU implementation step by step so
// that the results match bit for bit (MODEL_SPEC.md §3), and the config.json "quantization" reader.
#include "formats/mlx_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"

namespace strata::formats {

namespace {

bool is_quant_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// Rounds an f32 to the nearest value of `dtype` (F32/BF16/F16), as storing it there would.
float round_to(DType dtype, float v) {
  switch (dtype) {
    case DType::kBF16:
      return bf16_to_f32(f32_to_bf16(v));
    case DType::kF16:
      return f16_to_f32(f32_to_f16(v));
    default:
      return v;
  }
}

// Element access through memcpy: tensors mapped from a safetensors file need not be aligned
// (the data buffer starts at 8 + header length, which writers other than ours may leave odd).
void store(DType dtype, void* base, int64_t i, float v) {
  auto* p = static_cast<uint8_t*>(base) + i * static_cast<int64_t>(dtype_size(dtype));
  if (dtype == DType::kF32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

float load(DType dtype, const void* base, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(base) + i * static_cast<int64_t>(dtype_size(dtype));
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Writes code q of element `col` into a zeroed, LSB-first packed row.
void pack_code(uint32_t* row, int64_t col, int bits, uint32_t q) {
  const uint64_t bit = static_cast<uint64_t>(col) * bits;
  const uint64_t word = bit >> 5;
  const uint32_t shift = bit & 31;
  row[word] |= q << shift;
  if (shift + bits > 32) row[word + 1] |= q >> (32 - shift);
}

Shape with_last_dim(const Shape& shape, int64_t last) {
  Shape out = shape;
  out[-1] = last;
  return out;
}

}  // namespace

bool is_supported_quant(const QuantParams& p) {
  const bool bits_ok =
      p.bits == 2 || p.bits == 3 || p.bits == 4 || p.bits == 5 || p.bits == 6 || p.bits == 8;
  const bool group_ok = p.group_size == 32 || p.group_size == 64 || p.group_size == 128;
  return bits_ok && group_ok;
}

QuantizedMatrix quantize_affine(const Tensor& w, QuantParams params) {
  check(is_supported_quant(params), ErrorKind::kUnsupported,
        "affine quantization with bits={} group_size={} is not supported", params.bits,
        params.group_size);
  check(w.device == Device::kCpu, ErrorKind::kInvalidInput, "quantize_affine needs a host tensor");
  check(is_quant_float(w.dtype), ErrorKind::kUnsupported,
        "quantize_affine takes F32/BF16/F16, not {}", dtype_name(w.dtype));
  check(w.rank() >= 1 && w.shape[-1] % params.group_size == 0, ErrorKind::kInvalidInput,
        "quantize_affine: last dimension of shape {} is not a multiple of the group size {}",
        w.shape.str(), params.group_size);

  const int64_t cols = w.shape[-1];
  const int64_t rows = cols == 0 ? 0 : w.numel() / cols;
  const int64_t groups = cols / params.group_size;
  const int64_t words = cols * params.bits / 32;
  QuantizedMatrix out{HostTensor(DType::kU32, with_last_dim(w.shape, words)),
                      HostTensor(w.dtype, with_last_dim(w.shape, groups)),
                      HostTensor(w.dtype, with_last_dim(w.shape, groups)), params};

  // MLX computes everything in f32 (bf16/f16 inputs widen exactly) and rounds only the stored
  // scale and bias to the input dtype; the codes use the unrounded f32 scale and bias.
  const float n_bins = static_cast<float>((1 << params.bits) - 1);
  const float eps = 1e-7f;
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(w.dtype);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint8_t> raw(row_bytes);  // an aligned copy of the (possibly unaligned) input row
  for (int64_t r = 0; r < rows; ++r) {
    if (row_bytes > 0)
      std::memcpy(raw.data(), static_cast<const uint8_t*>(w.data) + r * row_bytes, row_bytes);
    convert_to_f32(w.dtype, raw.data(), row.data(), row.size());
    uint32_t* packed = out.weight.as<uint32_t>() + r * words;
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = row.data() + g * params.group_size;
      float w_max = -std::numeric_limits<float>::infinity();
      float w_min = std::numeric_limits<float>::infinity();
      for (int j = 0; j < params.group_size; ++j) {
        w_max = std::max(w_max, x[j]);
        w_min = std::min(w_min, x[j]);
      }
      // Anchor on the edge with the larger magnitude so that it is represented exactly (code 0),
      // which makes the scale negative when that edge is the maximum.
      const bool anchor_min = std::abs(w_min) > std::abs(w_max);
      float scale = std::max((w_max - w_min) / n_bins, eps);
      if (!anchor_min) scale = -scale;
      const float edge = anchor_min ? w_min : w_max;
      const float q0 = std::rint(edge / scale);
      float bias = 0.0f;
      if (q0 != 0.0f) {  // else (|edge| < eps / 2: a group of near-zeros) keep eps and bias 0
        scale = edge / q0;
        bias = edge;
      }
      for (int j = 0; j < params.group_size; ++j) {
        float q = std::rint((x[j] - bias) / scale);
        q = std::min(std::max(q, 0.0f), n_bins);
        const uint32_t code = std::isnan(q) ? 0u : static_cast<uint32_t>(q);
        pack_code(packed, g * params.group_size + j, params.bits, code);
      }
      store(w.dtype, out.scales.view().data, r * groups + g, scale);
      store(w.dtype, out.biases.view().data, r * groups + g, bias);
    }
  }
  return out;
}

HostTensor dequantize_affine(const Tensor& weight, const Tensor& scales, const Tensor& biases,
                             QuantParams params, DType out_dtype) {
  check(is_supported_quant(params), ErrorKind::kUnsupported,
        "affine quantization with bits={} group_size={} is not supported", params.bits,
        params.group_size);
  check(weight.device == Device::kCpu && scales.device == Device::kCpu &&
            biases.device == Device::kCpu,
        ErrorKind::kInvalidInput, "dequantize_affine needs host tensors");
  check(weight.dtype == DType::kU32, ErrorKind::kInvalidInput,
        "dequantize_affine: packed weight must be U32, not {}", dtype_name(weight.dtype));
  check(is_quant_float(scales.dtype) && biases.dtype == scales.dtype, ErrorKind::kInvalidInput,
        "dequantize_affine: scales ({}) and biases ({}) must share one of F32/BF16/F16",
        dtype_name(scales.dtype), dtype_name(biases.dtype));
  check(is_quant_float(out_dtype), ErrorKind::kUnsupported,
        "dequantize_affine: output dtype must be F32/BF16/F16, not {}", dtype_name(out_dtype));
  check(weight.rank() >= 1 && scales.shape == biases.shape && scales.rank() == weight.rank(),
        ErrorKind::kInvalidInput,
        "dequantize_affine: shapes weight {} scales {} biases {} do not match", weight.shape.str(),
        scales.shape.str(), biases.shape.str());
  for (int i = 0; i + 1 < weight.rank(); ++i) {
    check(weight.shape[i] == scales.shape[i], ErrorKind::kInvalidInput,
          "dequantize_affine: weight {} and scales {} differ outside the last dimension",
          weight.shape.str(), scales.shape.str());
  }
  const int64_t words = weight.shape[-1];
  check((words * 32) % params.bits == 0 &&
            words * 32 / params.bits == scales.shape[-1] * params.group_size,
        ErrorKind::kInvalidInput,
        "dequantize_affine: weight {} and scales {} do not fit bits={} group_size={}",
        weight.shape.str(), scales.shape.str(), params.bits, params.group_size);

  const int64_t cols = words * 32 / params.bits;
  const int64_t groups = scales.shape[-1];
  const int64_t rows = words == 0 ? 0 : weight.numel() / words;
  HostTensor out(out_dtype, with_last_dim(weight.shape, cols));
  // MLX dequantizes with ops in the scales' dtype: q is cast to it, then (q · scale) and (+ bias)
  // each round to that dtype; a different output dtype is a cast of that result.
  const DType compute = scales.dtype;
  std::vector<uint32_t> packed(static_cast<size_t>(words));  // aligned copy of one packed row
  for (int64_t r = 0; r < rows; ++r) {
    if (words > 0) {
      std::memcpy(packed.data(), static_cast<const uint8_t*>(weight.data) + r * words * 4,
                  static_cast<size_t>(words) * 4);
    }
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = load(compute, scales.data, r * groups + g);
      const float bias = load(compute, biases.data, r * groups + g);
      for (int j = 0; j < params.group_size; ++j) {
        const int64_t col = g * params.group_size + j;
        // q (8 bits) times the scale is exact in double; converting to float rounds it once, as an
        // f32 multiply would. Written this way because GCC contracts a float q*scale + bias into
        // an FMA in C++ (-ffp-contract=fast), which would skip that rounding.
        const double q = unpack_code(packed.data(), col, params.bits);
        const float product = round_to(compute, static_cast<float>(q * scale));
        store(out_dtype, out.view().data, r * cols + col, round_to(compute, product + bias));
      }
    }
  }
  return out;
}

namespace {

// Reads {"group_size", "bits", "mode"} of a quantization section or per-module entry; absent
// fields take `fallback`. Only the affine mode is supported.
QuantParams read_params(const Json& j, QuantParams fallback, const std::string& where) {
  QuantParams p = fallback;
  try {
    p.group_size = get_or<int>(j, "group_size", fallback.group_size);
    p.bits = get_or<int>(j, "bits", fallback.bits);
    const auto mode = get_or<std::string>(j, "mode", "affine");
    check(mode == "affine", ErrorKind::kUnsupported,
          "quantization mode '{}' is not supported (only affine)", mode);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", where, e.what()));
  }
  check(is_supported_quant(p), ErrorKind::kUnsupported,
        "{}: bits={} group_size={} is not supported (bits 2/3/4/5/6/8, group size 32/64/128)",
        where, p.bits, p.group_size);
  return p;
}

}  // namespace

QuantConfig QuantConfig::from_config(const Json& config) {
  QuantConfig qc;
  const char* section_name = "quantization";
  auto it = config.find(section_name);
  if (it == config.end() || it->is_null()) {
    section_name = "quantization_config";
    it = config.find(section_name);
  }
  if (it == config.end() || it->is_null()) return qc;
  const Json& section = *it;
  check(section.is_object(), ErrorKind::kInvalidInput,
        "config.json: '{}' must be an object, got {}", section_name, section.type_name());
  // Hugging Face quantizers (GPTQ, AWQ, FP8, ...) describe themselves with quant_method; their
  // weights are not MLX affine triples.
  if (section.contains("quant_method")) {
    fail(ErrorKind::kUnsupported, "config.json: {} uses quant_method {}, not MLX affine",
         section_name, section["quant_method"].dump());
  }
  qc.present_ = true;
  qc.defaults_ = read_params(section, QuantParams{}, fmt::format("config.json {}", section_name));
  for (const auto& [key, value] : section.items()) {
    if (value.is_boolean()) {
      // false: that module stays in float; true: quantized with the defaults.
      qc.overrides_[key] = value.get<bool>() ? std::optional(qc.defaults_) : std::nullopt;
    } else if (value.is_object()) {
      // As in mlx.nn.quantize, a per-module entry is the full argument list: fields it leaves out
      // take the affine defaults (64, 4), not the section's.
      qc.overrides_[key] =
          read_params(value, QuantParams{}, fmt::format("config.json {}.{}", section_name, key));
    }
  }
  return qc;
}

std::optional<QuantParams> QuantConfig::for_module(const std::string& path) const {
  const auto it = overrides_.find(path);
  return it != overrides_.end() ? it->second : std::optional(defaults_);
}

}  // namespace strata::formats
