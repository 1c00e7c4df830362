// Host tensors for the op tests: seeded normal inputs, NaN-filled outputs (so an element a kernel
// leaves unwritten fails), copies and I32 index lists; RoPE frequencies and the attention-input
// cases the fused-op tests share.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace strata::test {

inline HostTensor random_tensor(Shape shape, uint32_t seed, float stddev = 1.0f) {
  HostTensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = d(rng);
  return t;
}

// Filled with NaN, so an element a kernel leaves unwritten (or reads out of range) fails the test.
inline HostTensor nan_tensor(Shape shape) {
  HostTensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

inline HostTensor clone(const HostTensor& t) {
  HostTensor c(t.dtype(), t.shape());
  std::memcpy(c.as<void>(), t.as<void>(), t.view().nbytes());
  return c;
}

inline HostTensor int_tensor(const std::vector<int32_t>& values) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(values.size())});
  std::memcpy(t.as<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

// t (F32) rounded to `dtype` (F32, BF16 or F16) as stored, with the rounded values as F32 in as_f32:
// the scales a GPU weight holds, and what a reference must compute with.
inline HostTensor rounded(const Tensor& t, DType dtype, HostTensor& as_f32) {
  HostTensor out(dtype, t.shape);
  as_f32 = HostTensor(DType::kF32, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.as<const float>()[i];
    float r = v;
    if (dtype == DType::kBF16) {
      out.as<uint16_t>()[i] = f32_to_bf16(v);
      r = bf16_to_f32(out.as<uint16_t>()[i]);
    } else if (dtype == DType::kF16) {
      out.as<uint16_t>()[i] = f32_to_f16(v);
      r = f16_to_f32(out.as<uint16_t>()[i]);
    } else {
      out.as<float>()[i] = v;
    }
    as_f32.as<float>()[i] = r;
  }
  return out;
}

// RoPE inverse frequencies base^(−2i/rotary_dim), i < rotary_dim/2.
inline std::vector<float> inv_freq(int rotary_dim, float base) {
  std::vector<float> f(static_cast<size_t>(rotary_dim / 2));
  for (int i = 0; i < rotary_dim / 2; ++i)
    f[static_cast<size_t>(i)] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  return f;
}

// An attention layer's input handling, as qk_norm_rope_store sees it: head counts and size, the
// rotated part, NeoX (halves) or GPT-J (adjacent) pairs, an interleaved output gate, q/k norms and
// 1-centred norm weights.
struct AttnCase {
  const char* name;
  int64_t Hq, Hkv, D;
  int rotary_dim;
  bool neox, gated, norm, one_plus_w;
};

}  // namespace strata::test
