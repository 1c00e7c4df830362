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

}  // namespace strata::backend::cuda
