// matmul on the GPU for few activation rows (decode, and speculative verify up to 8 rows): each
// warp streams 4 or 8 weight rows once with 16-byte loads and keeps up to 8 dot products per row in
// registers. MLX affine weights (4 or 8 bits, groups of 32/64/128) stay packed in memory and are
// dequantized in registers: Σ (s·q + b)·x = s·Σ q·x + b·Σ x per group. Weights the tensor-core
// kernels take go to gemv_tc.cu (one row) and gemv_tc_rows.cu (2 to kMaxFedRows); more rows go
// to gemm.cu.
#include <cuda_runtime.h>

#include <span>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv_tc.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/scale_type.h"
#include "backend/cuda/segments.h"
#include "backend/cuda/warp.h"
#include "backend/tuning.h"

namespace strata::backend::cuda {

namespace {

constexpr int kMaxRows = 8;       // activation rows per launch
constexpr int kWarpsPerBlock = 8;  // at most, per block

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

// Each warp owns kRowsPerWarp weight rows, so every activation chunk it loads serves that many rows
// (activations would otherwise outweigh 4-bit weights 8 to 1 in load traffic).


// kT: the activation rows this instance is compiled for (1: decode, without the row loop's checks;
// kMaxRows: 2 to 8 rows, checked against T at run time).
template <int kBits, int kT, int kRowsPerWarp, typename S>
__global__ void gemv_affine_kernel(const float* __restrict__ x, int T, const WeightSegments segments, int64_t K,
                                   int group_size) {
  wait_for_inputs_then_release();
  const WeightSegment& seg = block_segment(segments);
  const uint4* __restrict__ codes = static_cast<const uint4*>(seg.codes);
  const S* __restrict__ scales = static_cast<const S*>(seg.scales);
  const S* __restrict__ biases = static_cast<const S*>(seg.biases);
  float* __restrict__ out = seg.out;
  const int64_t N = seg.n;
  constexpr int kPerChunk = 128 / kBits;  // elements in 16 bytes
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // The block's warps share its kRowsPerWarp rows and split K between them, so even a short matrix
  // (4096 rows) fills every SM with enough loads in flight; shared memory sums the warps' parts.
  const int64_t n0 = static_cast<int64_t>(blockIdx.x - seg.first_unit) * kRowsPerWarp;
  if (n0 >= N) return;  // uniform across the block
  const int rows = static_cast<int>(N - n0 < kRowsPerWarp ? N - n0 : kRowsPerWarp);
  const int64_t chunks = K / kPerChunk, groups = K / group_size;
  float acc[kRowsPerWarp][kT];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[r][t] = 0.0f;
#pragma unroll 2
  for (int64_t c = warp * 32 + lane; c < chunks; c += 32 * warps) {
    const int64_t col = c * kPerChunk;
    const int64_t g = col / group_size;  // a chunk never straddles groups (group_size ≥ 32)
    uint4 packed[kRowsPerWarp];
    float s[kRowsPerWarp], b[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t n = n0 + (r < rows ? r : 0);  // spare slots re-read row n0; never stored
      packed[r] = __ldg(codes + n * chunks + c);
      s[r] = scale_to_float(scales[n * groups + g]);
      b[r] = scale_to_float(biases[n * groups + g]);
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
      for (int i = 0; i < kPerChunk; ++i) xv[i] *= CodeScale<kBits>::scale(i % CodeScale<kBits>::kPerHalf);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] += s[r] * chunk_dot<kBits>(packed[r], xv) + b[r] * sum;
    }
  }
  __shared__ float partial[kWarpsPerBlock][kRowsPerWarp][kT];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) partial[warp][r][t] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kRowsPerWarp * kT; i += blockDim.x) {
    const int r = i / kT, t = i % kT;
    if (r >= rows || (kT > 1 && t >= T)) continue;
    float v = 0.0f;
    for (int w = 0; w < warps; ++w) v += partial[w][r][t];
    out[t * N + n0 + r] = v;
  }
}

__global__ void gemv_float_kernel(const float* __restrict__ x, int T, const float* __restrict__ w, int64_t N,
                                  int64_t K, float* __restrict__ out) {
  wait_for_inputs_then_release();
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

template <int kBits, int kT, int kRowsPerWarp, typename S>
void launch_affine_rows(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x, int T,
                        int64_t K) {
  const int64_t rows_per_block = kRowsPerWarp;
  // Warps per block: each lane gets about two 16-byte chunks per row, at most 8 warps (measured
  // on an H100 against one and four chunks per lane).
  const int64_t chunks = K * kBits / 128;
  int warps = 1;
  while (warps < kWarpsPerBlock && chunks >= int64_t{128} * warps) warps *= 2;
  WeightSegments segs;
  const unsigned blocks = make_segments(ws, outs, rows_per_block, segs);
  launch(gemv_affine_kernel<kBits, kT, kRowsPerWarp, S>, blocks, 32 * warps, 0, x, T, segs, K, ws[0]->group_size);
}

template <int kBits, typename S>
void launch_affine_bits(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x, int T,
                        int64_t K) {
  if (T > 1) {
    launch_affine_rows<kBits, kMaxRows, 4, S>(ws, outs, x, T, K);
  } else if (kBits == 4) {
    // 4-bit chunks carry twice the activations per byte of weights: 8 rows share each load
    // (measured on an H100: 40-44% of peak bandwidth against 25-34% with 4 rows, and worse with 16;
    // 8-bit is best at 4).
    launch_affine_rows<kBits, 1, 8, S>(ws, outs, x, T, K);
  } else {
    launch_affine_rows<kBits, 1, 4, S>(ws, outs, x, T, K);
  }
}

// Decode rows [t0, t0 + T) of every weight in one launch (all share bits and group size).
void launch_affine(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x, int T,
                   int64_t K) {
  with_scale_type(*ws[0], [&](auto s) {
    using S = decltype(s);
    if (ws[0]->bits == 4) {
      launch_affine_bits<4, S>(ws, outs, x, T, K);
    } else {
      launch_affine_bits<8, S>(ws, outs, x, T, K);
    }
  });
}

void matmul_float(const Tensor& x, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols(), rows = x.numel() / K;
  const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch(gemv_float_kernel, blocks, 32 * kWarpsPerBlock, 0, x.as<const float>(), static_cast<int>(rows),
         w.w.as<const float>(), N, K, out.as<float>());
}

// Tuning::gemv_tensor_cores false picks the CUDA-core decode kernel over the tensor-core one (to
// compare).
bool tensor_cores_enabled() { return tuning().gemv_tensor_cores; }
// The most rows the tensor-core decode kernels take (each row's bits those it gets alone); more go
// to the GEMM. Not batch-invariant (the tuning's switch off), the GEMM takes more than kGemmRows:
// up to 64 rows of 4-bit weights on the kernel that dequantizes codes in registers (gemm_rows.cu),
// beyond that, or for 8-bit weights, through a bf16 copy of the weights, whose cost hardly depends
// on the rows (measured on an H200, 9B 4-bit decode steps through the copy: 13.1 ms at 16
// sequences against 9.0 ms with the row kernels, 19.8 against 34.5 at 64; even at about 25).
constexpr int64_t kGemmRows = 24;

}  // namespace

int64_t decode_kernel_rows() { return tuning().batch_invariant ? kMaxFedRows : kGemmRows; }

void matmul(const Tensor& x, const Weight& w, const Tensor& out, const MatmulFeed* feed) {
  const Weight* ws[1] = {&w};
  const Tensor outs[1] = {out};
  cuda::matmul_group(x, ws, outs, feed);
}

void matmul_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs,
                  const MatmulFeed* feed, MatmulFeed* glu_feed) {
  MatmulFeed::none(glu_feed);  // until the tensor-core launch below writes it
  const int64_t K = ws[0]->cols();
  const int64_t rows = x.numel() / K;
  bool fusable = ws.size() <= kMaxSegments && ws[0]->quantized();
  bool tensor_cores = fusable;
  for (const Weight* w : ws) {
    fusable = fusable && w->bits == ws[0]->bits && w->group_size == ws[0]->group_size &&
              w->scales.dtype == ws[0]->scales.dtype;
    tensor_cores = tensor_cores && gemv_tc_supported(*w);
  }
  tensor_cores = tensor_cores && fusable && tensor_cores_enabled();
  float* out_ptr[kMaxSegments];  // of a launch of segments (at most kMaxSegments: fusable)
  if (fusable)
    for (size_t i = 0; i < ws.size(); ++i) out_ptr[i] = outs[i].as<float>();
  if (tensor_cores && rows > 1 && rows <= decode_kernel_rows()) {
    // A batch's decode rows (or a short prompt chunk): each row as gemv_tc gives it alone.
    gemv_tc_rows(x.as<const float>(), nullptr, rows, ws, std::span<float* const>(out_ptr, ws.size()),
                 fed_form(feed, x.data, *ws[0]));
    return;
  }
  tensor_cores = tensor_cores && rows == 1;
  if (rows > kMaxRows) {
    gemm_group(x, ws, outs);  // x converted to bf16 once for all of them
    return;
  }
  if (!fusable) {
    for (size_t i = 0; i < ws.size(); ++i) {
      if (ws[i]->quantized()) {
        cuda::matmul_group(x, std::span<const Weight* const>(&ws[i], 1), outs.subspan(i, 1));
      } else {
        matmul_float(x, *ws[i], outs[i]);
      }
    }
    return;
  }
  const float* xs = x.as<const float>();
  if (tensor_cores) {
    const bool glu_ok = glu_feed != nullptr && glu_feed->weight != nullptr &&
                        gemv_tc_glu_feed_ok(ws, *glu_feed->weight);
    const FeedForm glu_form = begin_feed(FeedKind::kGlu, glu_feed, outs[1].data, 1, ws[0]->rows(), glu_ok);
    gemv_tc(xs, nullptr, ws, std::span<float* const>(out_ptr, ws.size()),
            fed_form(feed, xs, *ws[0]), glu_form);
    return;
  }
  launch_affine(ws, std::span<float* const>(out_ptr, ws.size()), xs, static_cast<int>(rows), K);
  STRATA_CUDA_CHECK(cudaGetLastError());
}

int64_t batch_invariant_rows(std::span<const Weight* const> weights) {
  if (!tuning().batch_invariant) return kMaxFedRows;  // more than kMaxRows: the GEMM
  bool tensor_cores = tensor_cores_enabled();
  for (const Weight* w : weights) tensor_cores = tensor_cores && gemv_tc_supported(*w);
  return tensor_cores ? kMaxFedRows : kMaxRows;
}

void silu_mul_matmul(const Tensor& gate, const Tensor& up, const Weight& w, const Tensor& act,
                     const Tensor& out, const MatmulFeed* feed) {
  const int64_t rows = up.numel() / w.cols();
  if (rows <= decode_kernel_rows() && gemv_tc_supported(w) && tensor_cores_enabled()) {
    const Weight* ws[1] = {&w};
    float* outs[1] = {out.as<float>()};
    if (rows == 1) {
      gemv_tc(up.as<const float>(), gate.as<const float>(), ws, outs, fed_form(feed, up.data, w));
    } else {
      gemv_tc_rows(up.as<const float>(), gate.as<const float>(), rows, ws, outs, fed_form(feed, up.data, w));
    }
    return;
  }
  silu_mul(gate, up, act);
  cuda::matmul(act, w, out);
}

}  // namespace strata::backend::cuda
