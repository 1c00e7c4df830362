// One 16-byte chunk of MLX affine codes (32 × 4-bit or 16 × 8-bit) against its activations, on CUDA
// cores: the inner step of the CUDA-core matmul (matmul.cu) and of the routed experts (moe.cu). Per
// chunk, Σ (s·q + b)·x = s·chunk_dot(codes, xv) + b·Σ x, with xv from chunk_activations (a chunk never
// straddles a group: groups are at least 32 wide).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strata::backend::cuda {

// Codes become floats without the slow integer-to-float unit and without a shift per code: a code
// masked in place, m = q·2^(kBits·j) for the j-th code of a half word, is put in the mantissa of
// 2^23 by the same instruction (one LOP3: (word & mask) | 0x4B000000), and 2^23 is subtracted
// (exact, since m < 2^23). The activation it multiplies was pre-scaled by 2^-(kBits·j) (exact, a
// power of two, paid once per chunk for all of a warp's rows), so each weight costs a LOP3, an FADD
// and an FFMA. The upper half word is shifted down once.
template <int kBits>
struct CodeScale {
  static constexpr int kPerHalf = 16 / kBits;  // codes per 16-bit half word
  // 2^-(kBits·j) for code j of a half word
  static constexpr float scale(int j) { return kBits == 4 ? 1.0f / static_cast<float>(1 << (4 * j)) : (j == 0 ? 1.0f : 1.0f / 256.0f); }
};

__device__ inline float masked_code(uint32_t half_word, uint32_t mask) {
  return __uint_as_float((half_word & mask) | 0x4B000000u) - 8388608.0f;
}

// Σ q·x over one 16-byte chunk of codes (32 × 4-bit or 16 × 8-bit, LSB-first within each 32-bit
// word, as MLX packs them) against the matching pre-scaled activations held in registers.
template <int kBits>
__device__ inline float chunk_dot(const uint4 c, const float* x) {
  const uint32_t words[4] = {c.x, c.y, c.z, c.w};
  constexpr int kPerHalf = CodeScale<kBits>::kPerHalf;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  float dot = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t lo = words[w], hi = words[w] >> 16;
#pragma unroll
    for (int j = 0; j < kPerHalf; ++j) {
      dot += masked_code(lo, kMask << (kBits * j)) * x[w * 2 * kPerHalf + j];
      dot += masked_code(hi, kMask << (kBits * j)) * x[w * 2 * kPerHalf + kPerHalf + j];
    }
  }
  return dot;
}

// The chunk's activations from x (16-byte aligned, 128 / kBits of them) into xv, pre-scaled for
// chunk_dot; returns their plain sum.
template <int kBits>
__device__ inline float chunk_activations(const float* x, float (&xv)[128 / kBits]) {
  constexpr int kPerChunk = 128 / kBits;
  float sum = 0.0f;
  const float4* xp = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int i = 0; i < kPerChunk / 4; ++i) {
    const float4 v = xp[i];
    xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
    sum += (v.x + v.y) + (v.z + v.w);
  }
#pragma unroll
  for (int i = 0; i < kPerChunk; ++i) xv[i] *= CodeScale<kBits>::scale(i % CodeScale<kBits>::kPerHalf);
  return sum;
}

}  // namespace strata::backend::cuda
