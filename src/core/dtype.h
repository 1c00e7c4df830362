// Element types of tensors, with their names in safetensors and their sizes, and the scalar
// conversions between the float formats (bf16, f16, f8 e4m3/e5m2) and f32.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace strata {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kF64, kF8E4M3, kF8E5M2,
  kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kBool,
};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);      // the safetensors spelling: "F32", "BF16", ...
bool parse_dtype(std::string_view name, DType* out);
bool is_float(DType dtype);

inline float bf16_to_f32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

// Round to nearest even, as torch and MLX do; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float f);  // round to nearest even
float f8e4m3_to_f32(uint8_t v);
float f8e5m2_to_f32(uint8_t v);

// Converts n elements of a float dtype (F32/F16/BF16/F64/F8) to f32.
void convert_to_f32(DType dtype, const void* src, float* dst, size_t n);
// Converts n f32 values to F32/F16/BF16.
void convert_from_f32(const float* src, DType dtype, void* dst, size_t n);

}  // namespace strata
