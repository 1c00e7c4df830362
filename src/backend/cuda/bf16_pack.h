// Dequantizing to bf16, shared by the kernels that feed tensor cores from MLX affine codes (the
// prefill GEMM's tiles, the routed experts' grouped GEMM): each turns a code into s·q + b in fp32
// and rounds it once, so both round a weight the same way.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace strata::backend::cuda {

// The exact float of an integer code below 2^23 without an int→float conversion (a quarter-rate
// instruction): 2^23 + code has the code as its low mantissa bits, and subtracting 2^23 is exact.
__device__ __forceinline__ float code_to_float(uint32_t code) {
  return __uint_as_float(0x4B000000u | code) - 8388608.0f;
}

// Two floats rounded to bf16 (nearest even), `lo` at the lower address.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}

}  // namespace strata::backend::cuda
