// RMSNorm on the GPU, alone or after the residual add (add_rms_norm): one block per row, fp32 sum
// of squares reduced with warp shuffles.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"

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

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, bool one_plus_w,
                                int64_t d, float* out) {
  wait_for_inputs();
  const float* xr = x + blockIdx.x * d;
  float* o = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) o[i] = xr[i] * inv * (one_plus_w ? 1.0f + w[i] : w[i]);
}

// Block `row`: x[row] += delta[row], then, for rows from first_normed on, out[row − first_normed] =
// rms_norm(x[row]). Each thread reads back only the sums it wrote itself. kVec: rows in float4.
template <bool kVec>
__global__ void add_rms_norm_kernel(float* x, const float* delta, const float* w, float eps,
                                    bool one_plus_w, int64_t d, int64_t first_normed, float* out) {
  wait_for_inputs();
  const int64_t row = blockIdx.x;
  float* xr = x + row * d;
  const float* dr = delta + row * d;
  float ss = 0.0f;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
      float4 a = reinterpret_cast<const float4*>(xr)[i];
      const float4 b = reinterpret_cast<const float4*>(dr)[i];
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
      reinterpret_cast<float4*>(xr)[i] = a;
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += kThreads) {
      const float a = xr[i] + dr[i];
      xr[i] = a;
      ss += a * a;
    }
  }
  if (row < first_normed) return;  // the whole block: no barrier is left waiting
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  float* o = out + (row - first_normed) * d;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
      const float4 a = reinterpret_cast<const float4*>(xr)[i];
      float4 wv = reinterpret_cast<const float4*>(w)[i];
      if (one_plus_w) wv.x += 1.0f, wv.y += 1.0f, wv.z += 1.0f, wv.w += 1.0f;
      reinterpret_cast<float4*>(o)[i] =
          make_float4(a.x * inv * wv.x, a.y * inv * wv.y, a.z * inv * wv.z, a.w * inv * wv.w);
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += kThreads)
      o[i] = xr[i] * inv * (one_plus_w ? 1.0f + w[i] : w[i]);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out) {
  const int64_t d = w.numel();
  const int64_t rows = x.numel() / d, normed = out.numel() / d;
  if (rows == 0) return;
  float* px = x.as<float>();
  const float* pd = delta.as<const float>();
  const float* pw = w.as<const float>();
  float* po = out.as<float>();
  const unsigned blocks = static_cast<unsigned>(rows);
  if (d % 4 == 0 && aligned16(px) && aligned16(pd) && aligned16(pw) && aligned16(po)) {
    launch(add_rms_norm_kernel<true>, blocks, kThreads, 0, px, pd, pw, eps, one_plus_w, d,
           rows - normed, po);
  } else {
    launch(add_rms_norm_kernel<false>, blocks, kThreads, 0, px, pd, pw, eps, one_plus_w, d,
           rows - normed, po);
  }
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out) {
  const int64_t d = w.numel();
  const int64_t rows = x.numel() / d;
  if (rows == 0) return;
  launch(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x.as<const float>(),
         w.as<const float>(), eps, one_plus_w, d, out.as<float>());
}

}  // namespace strata::backend::cuda
