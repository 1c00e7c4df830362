// Prefill matmul: many activation rows reuse each weight, so the work is compute-bound and belongs
// on tensor cores. Quantized weights are dequantized tile by tile (at most kTileElements at a time)
// into a bf16 workspace and multiplied with cuBLAS (bf16 inputs, fp32 accumulation and output);
// the dequantization reads the packed weight once and costs little next to the GEMM at T ≥ 64.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"

#define STRATA_CUBLAS_CHECK(call)                                                            \
  do {                                                                                       \
    const cublasStatus_t strata_cublas_status = (call);                                      \
    if (strata_cublas_status != CUBLAS_STATUS_SUCCESS)                                       \
      ::strata::backend::cuda::throw_cuda_error(static_cast<int>(strata_cublas_status),      \
                                                cublasGetStatusString(strata_cublas_status), \
                                                __FILE__, __LINE__);                         \
  } while (0)

namespace strata::backend::cuda {

namespace {

constexpr int64_t kTileElements = int64_t{64} << 20;  // 128 MiB of bf16 weights per tile

cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    STRATA_CUBLAS_CHECK(cublasCreate(&created));
    STRATA_CUBLAS_CHECK(cublasSetStream(created, stream()));
    return created;
  }();
  return h;
}

// One thread per 32-bit word of codes: 8 (4-bit) or 4 (8-bit) weights, LSB first, as MLX packs
// them.
template <int kBits>
__global__ void dequantize_bf16_kernel(const uint32_t* __restrict__ codes,
                                       const float* __restrict__ scales,
                                       const float* __restrict__ biases, int64_t rows, int64_t K,
                                       int group_size, __nv_bfloat16* __restrict__ out) {
  constexpr int kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  const int64_t words_per_row = K / kPerWord;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * words_per_row) return;
  const int64_t r = i / words_per_row, col = (i % words_per_row) * kPerWord;
  const int64_t g = r * (K / group_size) + col / group_size;
  const float s = scales[g], b = biases[g];
  const uint32_t word = codes[i];
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + r * K + col);
#pragma unroll
  for (int j = 0; j < kPerWord; j += 2) {
    const float v0 = s * static_cast<float>((word >> (kBits * j)) & kMask) + b;
    const float v1 = s * static_cast<float>((word >> (kBits * (j + 1))) & kMask) + b;
    dst[j / 2] = __floats2bfloat162_rn(v0, v1);
  }
}

__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n,
                               __nv_bfloat16* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(x[i]);
}

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

void gemm(const Tensor& x, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols(), T = x.numel() / K;
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = handle();
  if (!w.quantized()) {
    // Column-major view: outᵀ [N, T] = w [K, N]ᵀ · xᵀ [K, T].
    STRATA_CUBLAS_CHECK(cublasSgemm(
        h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(T), static_cast<int>(K),
        &one, w.w.as<const float>(), static_cast<int>(K), x.as<const float>(), static_cast<int>(K),
        &zero, out.as<float>(), static_cast<int>(N)));
    return;
  }
  constexpr int kThreads = 256;
  auto* xb = static_cast<__nv_bfloat16*>(
      workspace(WorkspaceSlot::kMatmulB, static_cast<size_t>(T * K) * 2));
  to_bf16_kernel<<<blocks_for(T * K, kThreads), kThreads, 0, stream()>>>(x.as<const float>(), T * K,
                                                                         xb);
  STRATA_CUDA_CHECK(cudaGetLastError());
  const int64_t tile_rows =
      std::min<int64_t>(N, std::max<int64_t>(64, kTileElements / K / 64 * 64));
  auto* wb = static_cast<__nv_bfloat16*>(
      workspace(WorkspaceSlot::kMatmul, static_cast<size_t>(tile_rows * K) * 2));
  const int64_t groups = K / w.group_size, words = K * w.bits / 32;
  for (int64_t n0 = 0; n0 < N; n0 += tile_rows) {
    const int64_t n = std::min(tile_rows, N - n0);
    const uint32_t* codes = w.w.as<const uint32_t>() + n0 * words;
    const float* s = w.scales.as<const float>() + n0 * groups;
    const float* b = w.biases.as<const float>() + n0 * groups;
    const int64_t threads_total = n * words;
    if (w.bits == 4) {
      dequantize_bf16_kernel<4><<<blocks_for(threads_total, kThreads), kThreads, 0, stream()>>>(
          codes, s, b, n, K, w.group_size, wb);
    } else {
      dequantize_bf16_kernel<8><<<blocks_for(threads_total, kThreads), kThreads, 0, stream()>>>(
          codes, s, b, n, K, w.group_size, wb);
    }
    STRATA_CUDA_CHECK(cudaGetLastError());
    // outᵀ rows n0.. of [N, T] (leading dimension N).
    STRATA_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                     static_cast<int>(T), static_cast<int>(K), &one, wb,
                                     CUDA_R_16BF, static_cast<int>(K), xb, CUDA_R_16BF,
                                     static_cast<int>(K), &zero, out.as<float>() + n0, CUDA_R_32F,
                                     static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace strata::backend::cuda
