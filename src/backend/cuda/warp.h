// Reductions across the 32 lanes of a warp, shared by the kernels that sum a row in one warp.
#pragma once

#include <cuda_runtime.h>

namespace strata::backend::cuda {

// The sum of v over the warp's lanes, in every lane (a butterfly: the same order in every kernel).
template <typename T>
__device__ inline T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sums N values (N a power of two, 2 to 32) across the lanes that differ in the top log2(N) lane
// bits, leaving each lane one sum in d[0]: that of element lane / (32 / N). Each round keeps the
// half of the values that the lane's bit selects and adds the partner's copy of it, so the whole
// takes N − 1 shuffles instead of N warp_sums' 5 N. For N < 32, lanes that differ only in the low
// bits hold partial sums of the same element.
template <int N, int kHalf = N / 2>
__device__ inline void warp_reduce_scatter(float (&d)[N], int lane) {
  static_assert(N >= 2 && N <= 32 && (N & (N - 1)) == 0, "a power of two up to 32");
  constexpr int kBit = 32 * kHalf / N;  // 16 in the first round, then halving
  const bool upper = lane & kBit;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? d[i] : d[i + kHalf];
    d[i] = (upper ? d[i + kHalf] : d[i]) + __shfl_xor_sync(0xffffffffu, send, kBit);
  }
  if constexpr (kHalf > 1) warp_reduce_scatter<N, kHalf / 2>(d, lane);
}

}  // namespace strata::backend::cuda
