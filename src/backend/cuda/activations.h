// Activation functions of the CUDA kernels, written once so that every kernel computing one rounds
// it the same way (a fused kernel must match the op it replaces) and as the CPU reference does:
// expf, not __expf (GDN gates reach −30, where the fast exponential drifts).
#pragma once

#include <cuda_runtime.h>

namespace strata::backend::cuda {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// torch's softplus threshold: x itself above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// SiLU(gate) · up: the silu_mul op, and the down projection that forms it as it reads (gemv_tc).
__device__ __forceinline__ float swiglu(float gate, float up) { return silu(gate) * up; }

}  // namespace strata::backend::cuda
