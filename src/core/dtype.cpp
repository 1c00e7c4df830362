// DType tables and float-format conversions.
#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace strata {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4},       {DType::kF16, "F16", 2},       {DType::kBF16, "BF16", 2},
    {DType::kF64, "F64", 8},       {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kI8, "I8", 1},         {DType::kU8, "U8", 1},         {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},       {DType::kI32, "I32", 4},       {DType::kU32, "U32", 4},
    {DType::kI64, "I64", 8},       {DType::kU64, "U64", 8},       {DType::kBool, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }
std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& info : kDTypes) {
    if (info.name == name) {
      *out = info.dtype;
      return true;
    }
  }
  return false;
}

bool is_float(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kF64:
    case DType::kF8E4M3: case DType::kF8E5M2:
      return true;
    default:
      return false;
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (incl. inf) after rounding
  if (abs < 0x38800000u) {                        // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;           // below half the smallest subnormal
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = half_mant;
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent by (127 - 15) << 23
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

float f8e4m3_to_f32(uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xf;
  const int mant = v & 0x7;
  if (exp == 0xf && mant == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant) / 8.0f, -6);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
}

float f8e5m2_to_f32(uint8_t v) { return f16_to_f32(static_cast<uint16_t>(v) << 8); }

namespace {
// Element i of a possibly unaligned array (mapped files need not align their tensors).
template <typename T>
inline T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}
}  // namespace

void convert_to_f32(DType dtype, const void* src, float* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src, i));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load<uint16_t>(src, i));
      return;
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(src, i));
      return;
    case DType::kF8E4M3: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(s[i]);
      return;
    }
    case DType::kF8E5M2: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e5m2_to_f32(s[i]);
      return;
    }
    default:
      fail(ErrorKind::kUnsupported, "cannot convert {} to F32", dtype_name(dtype));
  }
}

void convert_from_f32(const float* src, DType dtype, void* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      fail(ErrorKind::kUnsupported, "cannot convert F32 to {}", dtype_name(dtype));
  }
}

}  // namespace strata
