// Prefill matmul: many activation rows reuse each weight, so the work is compute-bound and belongs
// on tensor cores. Quantized weights are dequantized a tile of rows at a time into a bf16 workspace
// and multiplied with cuBLAS (bf16 inputs, fp32 accumulation and output). Tiles are large (up to
// 128 MiB of bf16, a whole projection of an 8B model): measured on an H100 at 512 prompt tokens,
// tiles of 16-64 MiB that stay in the 50 MB L2 made cuBLAS calls too small to fill the GPU and
// prefill 20-30% slower than whole matrices.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>

#include "backend/cuda/bf16_pack.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_rows.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/scale_type.h"

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

// Elements per tile (128 MiB of bf16): bounds the workspace.
constexpr int64_t kTileElements = int64_t{64} << 20;
// Tile heights are multiples of cuBLAS's block heights (64/128/256 rows).
constexpr int64_t kTileRowAlign = 128;

constexpr int kThreads = 256;
constexpr int kWordsPerThread = 4;  // 16 bytes of codes per thread
constexpr int kWordsPerBlock = kThreads * kWordsPerThread;

cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    STRATA_CUBLAS_CHECK(cublasCreate(&created));
    STRATA_CUBLAS_CHECK(cublasSetStream(created, stream()));
    return created;
  }();
  return h;
}

[[noreturn]] void unsupported(const char* message) {
  throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), message, __FILE__, __LINE__);
}

// Dequantizes `words` consecutive 32-bit code words of a tile (rows back to back, MLX packing:
// 8 four-bit or 4 eight-bit codes per word, LSB first) into bf16 s·q + b, rounded once. A tile is
// one flat run of elements: word i holds elements i·(32/kBits).., whose group is element / group
// size because rows are whole groups. Each thread takes 4 words a block-width apart, so a warp's
// loads and its 16-byte (4-bit) or 8-byte (8-bit) stores are contiguous. The codes are read once:
// loaded evict-first so they do not push the bf16 tile out of L2.
template <int kBits, typename S>
__global__ void __launch_bounds__(kThreads)
    dequantize_bf16_kernel(const uint32_t* __restrict__ codes, const S* __restrict__ scales,
                           const S* __restrict__ biases, uint32_t words, int group_shift,
                           __nv_bfloat16* __restrict__ out) {
  wait_for_inputs();
  constexpr int kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  const uint32_t first = blockIdx.x * kWordsPerBlock + threadIdx.x;
  uint32_t word[kWordsPerThread] = {};
  float scale[kWordsPerThread] = {}, bias[kWordsPerThread] = {};
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    const uint32_t i = first + j * kThreads;
    if (i < words) {
      word[j] = __ldcs(codes + i);
      const uint32_t g = (i * kPerWord) >> group_shift;
      scale[j] = scale_to_float(scales[g]);
      bias[j] = scale_to_float(biases[g]);
    }
  }
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    const uint32_t i = first + j * kThreads;
    if (i >= words) break;
    uint32_t packed[kPerWord / 2];
#pragma unroll
    for (int k = 0; k < kPerWord; k += 2) {
      const float lo =
          __fmaf_rn(scale[j], code_to_float((word[j] >> (kBits * k)) & kMask), bias[j]);
      const float hi =
          __fmaf_rn(scale[j], code_to_float((word[j] >> (kBits * (k + 1))) & kMask), bias[j]);
      packed[k / 2] = pack_bf16x2(lo, hi);
    }
    __nv_bfloat16* dst = out + static_cast<size_t>(i) * kPerWord;
    if constexpr (kBits == 4) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    } else {
      *reinterpret_cast<uint2*>(dst) = make_uint2(packed[0], packed[1]);
    }
  }
}

// x rounded to bf16, 8 values per thread: two 16-byte loads, one 16-byte store.
__global__ void to_bf16_x8_kernel(const float4* __restrict__ x, int64_t n8,
                                  uint4* __restrict__ out) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n8) return;
  const float4 a = x[2 * i], b = x[2 * i + 1];
  out[i] = make_uint4(pack_bf16x2(a.x, a.y), pack_bf16x2(a.z, a.w), pack_bf16x2(b.x, b.y),
                      pack_bf16x2(b.z, b.w));
}

// The same for an x that is not 16-byte aligned (a view into the middle of a buffer).
__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n,
                               __nv_bfloat16* __restrict__ out) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(x[i]);
}

unsigned blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

// x [T, K] (F32) as bf16 in the kMatmulB workspace.
const __nv_bfloat16* activations_bf16(const Tensor& x, int64_t n) {
  auto* xb = static_cast<__nv_bfloat16*>(
      workspace(WorkspaceSlot::kMatmulB, static_cast<size_t>(n) * sizeof(__nv_bfloat16)));
  const float* src = x.as<const float>();
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && n % 8 == 0) {
    launch(to_bf16_x8_kernel, blocks_for(n / 8, kThreads), kThreads, 0,
           reinterpret_cast<const float4*>(src), n / 8, reinterpret_cast<uint4*>(xb));
  } else {
    launch(to_bf16_kernel, blocks_for(n, kThreads), kThreads, 0, src, n, xb);
  }
  return xb;
}

// Column-major view: outᵀ [N, T] = w [K, N]ᵀ · xᵀ [K, T].
void gemm_float(const Tensor& x, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols(), T = x.numel() / K;
  const float one = 1.0f, zero = 0.0f;
  STRATA_CUBLAS_CHECK(cublasSgemm(
      handle(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(T),
      static_cast<int>(K), &one, w.w.as<const float>(), static_cast<int>(K), x.as<const float>(),
      static_cast<int>(K), &zero, out.as<float>(), static_cast<int>(N)));
}

// S: the C++ type of the weight's scales and biases (float, __nv_bfloat16 or __half).
template <typename S>
void gemm_affine(const __nv_bfloat16* xb, int64_t T, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols();
  const int64_t tile_rows = gemm_tile_rows(N, K);
  auto* wb = static_cast<__nv_bfloat16*>(workspace(
      WorkspaceSlot::kMatmul, static_cast<size_t>(tile_rows * K) * sizeof(__nv_bfloat16)));
  const int64_t groups = K / w.group_size, words = K * w.bits / 32;
  const int group_shift = std::countr_zero(static_cast<unsigned>(w.group_size));
  const float one = 1.0f, zero = 0.0f;
  for (int64_t n0 = 0; n0 < N; n0 += tile_rows) {
    const int64_t n = std::min(tile_rows, N - n0);
    const uint32_t* codes = w.w.as<const uint32_t>() + n0 * words;
    const S* s = w.scales.as<const S>() + n0 * groups;
    const S* b = w.biases.as<const S>() + n0 * groups;
    const auto tile_words = static_cast<uint32_t>(n * words);  // < 2^24: tiles are ≤ 2^26 elements
    const unsigned blocks = blocks_for(tile_words, kWordsPerBlock);
    if (w.bits == 4) {
      launch(dequantize_bf16_kernel<4, S>, blocks, kThreads, 0, codes, s, b, tile_words,
             group_shift, wb);
    } else {
      launch(dequantize_bf16_kernel<8, S>, blocks, kThreads, 0, codes, s, b, tile_words,
             group_shift, wb);
    }
    // outᵀ rows n0.. of [N, T] (leading dimension N).
    STRATA_CUBLAS_CHECK(cublasGemmEx(handle(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                     static_cast<int>(T), static_cast<int>(K), &one, wb,
                                     CUDA_R_16BF, static_cast<int>(K), xb, CUDA_R_16BF,
                                     static_cast<int>(K), &zero, out.as<float>() + n0, CUDA_R_32F,
                                     static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void gemm_quantized(const __nv_bfloat16* xb, int64_t T, const Weight& w, const Tensor& out) {
  if (w.bits != 4 && w.bits != 8) unsupported("gemm: quantized weights must have 4 or 8 bits");
  if (!std::has_single_bit(static_cast<unsigned>(w.group_size)) || w.group_size < 32)
    unsupported("gemm: the group size must be a power of two of at least 32");
  with_scale_type(w, [&](auto s) { gemm_affine<decltype(s)>(xb, T, w, out); });
}

}  // namespace

int64_t gemm_tile_rows(int64_t N, int64_t K) {
  const int64_t max_rows = std::max(kTileRowAlign, kTileElements / K / kTileRowAlign * kTileRowAlign);
  if (N <= max_rows) return N;
  // As many tiles as max_rows needs, evened out so that the last one is not a sliver.
  const int64_t tiles = (N + max_rows - 1) / max_rows;
  const int64_t even = (N + tiles - 1) / tiles;
  return std::min(N, (even + kTileRowAlign - 1) / kTileRowAlign * kTileRowAlign);
}

void gemm(const Tensor& x, const Weight& w, const Tensor& out) {
  const Weight* ws[1] = {&w};
  const Tensor outs[1] = {out};
  gemm_group(x, ws, outs);
}

void gemm_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs) {
  const int64_t K = ws[0]->cols(), T = x.numel() / K;
  // Few rows: the codes straight into the products (gemm_rows), all the weights in one launch
  // where they allow it.
  bool rows_kernel = gemm_rows_fusable(ws);
  for (const Weight* w : ws) rows_kernel = rows_kernel && gemm_rows_supported(*w, T);
  if (rows_kernel) {
    gemm_rows(gemm_rows_paired(*ws[0]) ? gemm_rows_activations(x, T * K) : activations_bf16(x, T * K), T, ws,
              outs);
    return;
  }
  const __nv_bfloat16* xb = nullptr;  // converted once, for the first quantized weight
  const __nv_bfloat16* xp = nullptr;  // the same in gemm_rows' paired order
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!ws[i]->quantized()) {
      gemm_float(x, *ws[i], outs[i]);
      continue;
    }
    if (gemm_rows_supported(*ws[i], T)) {
      const bool paired = gemm_rows_paired(*ws[i]);
      const __nv_bfloat16*& xr = paired ? xp : xb;
      if (xr == nullptr) xr = paired ? gemm_rows_activations(x, T * K) : activations_bf16(x, T * K);
      gemm_rows(xr, T, ws.subspan(i, 1), outs.subspan(i, 1));
      continue;
    }
    if (xb == nullptr) xb = activations_bf16(x, T * K);
    gemm_quantized(xb, T, *ws[i], outs[i]);
  }
}

}  // namespace strata::backend::cuda
