// RMSNorm on the GPU: one block per row, fp32 sum of squares reduced with warp shuffles.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace strata::backend::cuda {

namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, bool one_plus_w, int64_t d,
                                float* out) {
  const float* xr = x + blockIdx.x * d;
  float* o = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) o[i] = xr[i] * inv * (one_plus_w ? 1.0f + w[i] : w[i]);
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out) {
  const int64_t d = w.numel();
  const int64_t rows = x.numel() / d;
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x.as<const float>(), w.as<const float>(), eps,
                                                             one_plus_w, d, out.as<float>());
  STRATA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace strata::backend::cuda
