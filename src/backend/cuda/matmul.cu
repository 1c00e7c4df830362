// matmul on the GPU for few activation rows (decode, and speculative verify up to 8 rows): each
// warp streams 4 or 8 weight rows once with 16-byte loads and keeps up to 8 dot products per row in
// registers. MLX affine weights (4 or 8 bits, groups of 32/64/128) stay packed in memory and are
// dequantized in registers: Σ (s·q + b)·x = s·Σ q·x + b·Σ x per group. More rows go to gemm.cu.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"

namespace strata::backend::cuda {

namespace {

constexpr int kMaxRows = 8;       // activation rows per launch
constexpr int kWarpsPerBlock = 8;  // weight rows per block

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// An integer code (< 2^23) as a float without the slow integer-to-float unit: placed in the
// mantissa of 2^23, then 2^23 subtracted (exact).
__device__ inline float code_to_float(uint32_t q) { return __uint_as_float(0x4B000000u | q) - 8388608.0f; }

// Σ q·x over one 16-byte chunk of codes (32 × 4-bit or 16 × 8-bit, LSB-first within each 32-bit
// word, as MLX packs them) against the matching activations held in registers.
template <int kBits>
__device__ inline float chunk_dot(const uint4 c, const float* x) {
  const uint32_t words[4] = {c.x, c.y, c.z, c.w};
  constexpr int kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  float dot = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w)
#pragma unroll
    for (int j = 0; j < kPerWord; ++j)
      dot += code_to_float((words[w] >> (kBits * j)) & kMask) * x[w * kPerWord + j];
  return dot;
}

// Each warp owns kRowsPerWarp weight rows, so every activation chunk it loads serves that many rows
// (activations would otherwise outweigh 4-bit weights 8 to 1 in memory traffic). 8 rows per warp
// only pays for 4-bit weights on very tall matrices (the lm_head): elsewhere it leaves SMs without
// blocks.
constexpr int64_t kTallRows = 65536;

// kT: the activation rows this instance is compiled for (1: decode, without the row loop's checks;
// kMaxRows: 2 to 8 rows, checked against T at run time).
template <int kBits, int kT, int kRowsPerWarp>
__global__ void gemv_affine_kernel(const float* __restrict__ x, int T, const uint4* __restrict__ codes,
                                   const float* __restrict__ scales, const float* __restrict__ biases, int64_t N,
                                   int64_t K, int group_size, float* __restrict__ out) {
  constexpr int kPerChunk = 128 / kBits;  // elements in 16 bytes
  const int lane = threadIdx.x % 32;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * kRowsPerWarp;
  if (n0 >= N) return;
  const int rows = static_cast<int>(N - n0 < kRowsPerWarp ? N - n0 : kRowsPerWarp);
  const int64_t chunks = K / kPerChunk, groups = K / group_size;
  float acc[kRowsPerWarp][kT];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[r][t] = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    const int64_t col = c * kPerChunk;
    const int64_t g = col / group_size;  // a chunk never straddles groups (group_size ≥ 32)
    uint4 packed[kRowsPerWarp];
    float s[kRowsPerWarp], b[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t n = n0 + (r < rows ? r : 0);  // spare slots re-read row n0; never stored
      packed[r] = __ldg(codes + n * chunks + c);
      s[r] = __ldg(scales + n * groups + g);
      b[r] = __ldg(biases + n * groups + g);
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (kT > 1 && t >= T) break;
      float xv[kPerChunk];
      float sum = 0.0f;
      const float4* xp = reinterpret_cast<const float4*>(x + t * K + col);
#pragma unroll
      for (int i = 0; i < kPerChunk / 4; ++i) {
        const float4 v = xp[i];
        xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
        sum += (v.x + v.y) + (v.z + v.w);
      }
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] += s[r] * chunk_dot<kBits>(packed[r], xv) + b[r] * sum;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (r >= rows) break;
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (kT > 1 && t >= T) break;
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) out[t * N + n0 + r] = v;
    }
  }
}

__global__ void gemv_float_kernel(const float* __restrict__ x, int T, const float* __restrict__ w, int64_t N,
                                  int64_t K, float* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= N) return;
  const float* row = w + n * K;
  float acc[kMaxRows];
#pragma unroll
  for (int t = 0; t < kMaxRows; ++t) acc[t] = 0.0f;
  for (int64_t k = lane; k < K; k += 32) {
    const float v = __ldg(row + k);
#pragma unroll
    for (int t = 0; t < kMaxRows; ++t) {
      if (t >= T) break;
      acc[t] += v * x[t * K + k];
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxRows; ++t) {
    if (t >= T) break;
    const float v = warp_sum(acc[t]);
    if (lane == 0) out[t * N + n] = v;
  }
}

template <int kBits, int kT, int kRowsPerWarp>
void launch_affine_rows(const Weight& w, const float* x, int T, int64_t N, int64_t K, float* out) {
  const int64_t rows_per_block = int64_t{kWarpsPerBlock} * kRowsPerWarp;
  const unsigned blocks = static_cast<unsigned>((N + rows_per_block - 1) / rows_per_block);
  gemv_affine_kernel<kBits, kT, kRowsPerWarp><<<blocks, 32 * kWarpsPerBlock, 0, stream()>>>(x, T, static_cast<const uint4*>(w.w.data),
                                                                 w.scales.as<const float>(), w.biases.as<const float>(),
                                                                 N, K, w.group_size, out);
}

template <int kBits>
void launch_affine_bits(const Weight& w, const float* x, int T, int64_t N, int64_t K, float* out) {
  if (T > 1) {
    launch_affine_rows<kBits, kMaxRows, 4>(w, x, T, N, K, out);
  } else if (kBits == 4 && N >= kTallRows) {  // measured: 8-bit rows are better served 4 per warp
    launch_affine_rows<kBits, 1, 8>(w, x, T, N, K, out);
  } else {
    launch_affine_rows<kBits, 1, 4>(w, x, T, N, K, out);
  }
}

void launch_affine(const Weight& w, const float* x, int T, int64_t N, int64_t K, float* out) {
  if (w.bits == 4) {
    launch_affine_bits<4>(w, x, T, N, K, out);
  } else {
    launch_affine_bits<8>(w, x, T, N, K, out);
  }
}

}  // namespace

void matmul(const Tensor& x, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols();
  const int64_t rows = x.numel() / K;
  const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (rows > kMaxRows) {
    gemm(x, w, out);
    return;
  }
  const float* xs = x.as<const float>();
  float* o = out.as<float>();
  for (int64_t t0 = 0; t0 < rows; t0 += kMaxRows) {
    const int T = static_cast<int>(rows - t0 < kMaxRows ? rows - t0 : kMaxRows);
    const float* xt = xs + t0 * K;
    float* ot = o + t0 * N;
    if (!w.quantized()) {
      gemv_float_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream()>>>(xt, T, w.w.as<const float>(), N, K, ot);
    } else {
      launch_affine(w, xt, T, N, K, ot);
    }
    STRATA_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace strata::backend::cuda
