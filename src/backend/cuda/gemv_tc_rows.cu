// Decode matmul of several activation rows (a batch's sequences, one token each) of MLX affine
// 4/8-bit weights on integer tensor cores, giving each row exactly what gemv_tc.cu's one-row kernel
// gives it alone.
//
// Why it matches. The one-row kernel's result for an output is a fixed sequence of fp32 operations
// on exact integers: for each of a k-tile's four runs r, the run's code·limb sums over each fold
// made into v = top·65536 + mid·256 + low (gemv_math::limb_value), folded into that run's
// accumulator (gemv_math::fold_run) tile after tile over the warp's k slice; then (acc0 + acc1) +
// (acc2 + acc3); then the k slices' partial sums in slice order. Integer sums are exact in any
// order, so this kernel lays its mmas out its own way and keeps the rest: the one-row launch's k
// slices (gemv_tc_rows passes them), the same folds in the same order.
//
// Layout. Where the one-row kernel gives each lane's run a column pair and a quarter of each mma's
// k-slots, this kernel puts one run in all 32 k-slots of an mma and a token in each of its 8
// columns: lane (g, c) holds code words of run r of rows g and g + 8 (steps c and 4 + c at 4 bits,
// two mmas a run; both words of step c at 8 bits, one mma), and B column g is token g's limbs of
// those codes, read from its form, which multi-row forms lay out by run then step
// (gemv_math::b_vec) so that the four lanes of a token read one contiguous 128 bytes.
// Three mmas a chunk (top, mid and low limb) give C[row][token] for 8 tokens: 3 mmas a run and 8
// tokens, against the one-row kernel's 4 a run and token.
//
// Work. As the one-row kernel, a block takes a contiguous range of 16-row m-tiles in passes of
// row_warps, its warps row_warps × k_warps; each warp carries kGroups groups of 8 tokens. A launch
// takes up to kMaxTokens tokens (more take several launches). The B vectors and run info come from
// the forms in global memory: the block's other warps and the other blocks read the same, from L1
// and L2.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/gemv_math.h"
#include "backend/cuda/gemv_tc.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/scale_type.h"
#include "backend/cuda/segments.h"

namespace strata::backend::cuda {

namespace {

using gemv_math::Geometry;

constexpr int kMaxWarps = 8;        // per block, as the one-row kernel
constexpr int kMaxGroups = 2;       // groups of 8 tokens a warp carries
constexpr int kMaxTokens = 8 * kMaxGroups;  // a launch's

// kMinBlocks: blocks a multiprocessor keeps resident (registers capped to fit them).
template <int kBits, int kFolds, int kGroups, typename S>
__global__ void __launch_bounds__(32 * kMaxWarps, kGroups <= 2 ? 2 : 1)
    gemv_rows_kernel(const uint4* __restrict__ forms, int64_t form_vecs, int T, const WeightSegments segs,
                     int64_t K, int group_shift, int row_warps, int k_warps, unsigned tiles16) {
  using G = Geometry<kBits>;
  constexpr int kTokens = 8 * kGroups;
  constexpr int kChunks = kBits == 4 ? 2 : 1;  // mmas of 32 codes a run
  constexpr uint32_t kLow = 0x0F0F0F0Fu;
  __shared__ float partial[kMaxWarps * 16 * kTokens];  // [k slice][row of the pass][token]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int wr = warp / k_warps, wk = warp % k_warps;
  const int pass_rows = 16 * row_warps;
  const int64_t tiles = K / G::kTileK, row_bytes = K * kBits / 8, groups = K >> group_shift;
  const unsigned first = static_cast<unsigned>(uint64_t{blockIdx.x} * tiles16 / gridDim.x);
  const unsigned last = static_cast<unsigned>((uint64_t{blockIdx.x} + 1) * tiles16 / gridDim.x);
  // Token g of a group is this lane's B column, tokens 2c and 2c + 1 its C columns; tokens past T
  // re-read the last and are never stored. Their forms' B vectors and run info:
  const float4* info_base = reinterpret_cast<const float4*>(forms + tiles * G::kTileVecs);

  wait_for_inputs_then_release();
  for (unsigned pass = first; pass < last; pass += row_warps) {
    const unsigned m_tile = pass + wr;
    const bool busy = m_tile < last;  // warp-uniform
    const WeightSegment& seg = unit_segment(segs, busy ? m_tile : first);
    const int64_t warp_row0 = static_cast<int64_t>(m_tile - seg.first_unit) * 16;
    const uint8_t* code_row[2];
    const S* scale_row[2];
    const S* bias_row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = min(warp_row0 + g + 8 * h, seg.n - 1);
      code_row[h] = static_cast<const uint8_t*>(seg.codes) + row * row_bytes;
      scale_row[h] = static_cast<const S*>(seg.scales) + row * groups;
      bias_row[h] = static_cast<const S*>(seg.biases) + row * groups;
    }

    float acc[kGroups][4][4] = {};  // [group][run][C element: row g/g+8 × token 2c/2c+1]
    const int64_t t_end = busy ? tiles : 0;
    for (int64_t t = wk; t < t_end; t += k_warps) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        // Run r's A fragments (codes of rows g and g + 8) and its groups' scales and biases.
        uint32_t a[kChunks][4];
#pragma unroll
        for (int i = 0; i < kChunks; ++i) {
          if constexpr (kBits == 4) {
            const int64_t off = t * gemv_math::kTileBytes + r * 32 + 16 * i + 4 * c;  // step 4i + c
            const uint32_t w0 = __ldg(reinterpret_cast<const uint32_t*>(code_row[0] + off));
            const uint32_t w1 = __ldg(reinterpret_cast<const uint32_t*>(code_row[1] + off));
            a[i][0] = w0 & kLow, a[i][1] = w1 & kLow, a[i][2] = (w0 >> 4) & kLow, a[i][3] = (w1 >> 4) & kLow;
          } else {
            const int64_t off = t * gemv_math::kTileBytes + r * 32 + 8 * c;  // step c
            const uint2 u0 = __ldg(reinterpret_cast<const uint2*>(code_row[0] + off));
            const uint2 u1 = __ldg(reinterpret_cast<const uint2*>(code_row[1] + off));
            a[i][0] = u0.x, a[i][1] = u1.x, a[i][2] = u0.y, a[i][3] = u1.y;
          }
        }
        float sc[2][kFolds], bi[2][kFolds];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int f = 0; f < kFolds; ++f) {
            // As the one-row kernel finds a run's group: its tile's, its run's within, the fold's.
            const int64_t gi = ((t * G::kTileK) >> group_shift) + ((r * G::kRun) >> group_shift) + f;
            sc[h][f] = scale_to_float(scale_row[h][gi]);
            bi[h][f] = scale_to_float(bias_row[h][gi]);
          }
#pragma unroll
        for (int q = 0; q < kGroups; ++q) {
          const uint4* bt = forms + min(8 * q + g, T - 1) * form_vecs + t * G::kTileVecs;
          const float4 run[2] = {__ldg(info_base + min(8 * q + 2 * c, T - 1) * form_vecs + t * 4 + r),
                                 __ldg(info_base + min(8 * q + 2 * c + 1, T - 1) * form_vecs + t * 4 + r)};
          int top[4] = {}, mid[4] = {}, low[4] = {};
#pragma unroll
          for (int i = 0; i < kChunks; ++i) {
            const int step = kBits == 4 ? 4 * i + c : c;
            const uint4* b = bt + gemv_math::b_vec<kBits, true>(step, r);
            const uint4 v0 = __ldg(b), v1 = __ldg(b + 1);
            gemv_math::imma(top, a[i][0], a[i][1], a[i][2], a[i][3], v0.x, v0.y);
            gemv_math::imma(low, a[i][0], a[i][1], a[i][2], a[i][3], v0.z, v0.w);
            gemv_math::imma(mid, a[i][0], a[i][1], a[i][2], a[i][3], v1.x, v1.y);
            // A fold is a chunk at 4 bits in groups of 32, else the whole run.
            if (kFolds == 2 || i == kChunks - 1) {
              const int fold = kFolds == 2 ? i : 0;
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int h = e / 2;
                const float4& in = run[e % 2];
                const float v = gemv_math::limb_value(top[e], mid[e], low[e]);
                acc[q][r][e] = gemv_math::fold_run(acc[q][r][e], v, sc[h][fold], in.x, bi[h][fold],
                                                   fold == 0 ? in.y : in.z);
                top[e] = mid[e] = low[e] = 0;
              }
            }
          }
        }
      }
    }

    // The runs in the one-row kernel's order, then the k slices in slice order.
#pragma unroll
    for (int q = 0; q < kGroups; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float v = (acc[q][0][e] + acc[q][1][e]) + (acc[q][2][e] + acc[q][3][e]);
        const int row = wr * 16 + g + 8 * (e / 2), token = 8 * q + 2 * c + e % 2;
        partial[(wk * pass_rows + row) * kTokens + token] = v;
      }
    __syncthreads();
    for (int i = threadIdx.x; i < pass_rows * kTokens; i += blockDim.x) {
      const int row_in_pass = i / kTokens, token = i % kTokens;
      const unsigned m = pass + row_in_pass / 16;
      if (m >= last || token >= T) continue;
      const WeightSegment& out_seg = unit_segment(segs, m);
      const int64_t row = static_cast<int64_t>(m - out_seg.first_unit) * 16 + row_in_pass % 16;
      if (row >= out_seg.n) continue;
      float r = 0.0f;
      for (int w = 0; w < k_warps; ++w) r += partial[(w * pass_rows + row_in_pass) * kTokens + token];
      out_seg.out[token * out_seg.n + row] = r;
    }
    __syncthreads();  // partial is rewritten in the next pass
  }
}

template <int kBits, int kFolds, int kGroups, typename S>
void launch_rows(const uint4* forms, int64_t form_vecs, int T, std::span<const Weight* const> ws,
                 std::span<float* const> outs, int k_warps) {
  auto* kernel = gemv_rows_kernel<kBits, kFolds, kGroups, S>;
  static const int blocks_per_sm = [&] {
    int n = 0;
    STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * kMaxWarps, 0));
    return std::max(n, 1);
  }();
  WeightSegments segs;
  const unsigned tiles16 = make_segments(ws, outs, 16, segs);
  const int row_warps = std::max(1, kMaxWarps / k_warps);
  const unsigned grid = std::min<unsigned>((tiles16 + row_warps - 1) / row_warps,
                                           static_cast<unsigned>(blocks_per_sm * sm_count()));
  const int group_shift = __builtin_ctz(static_cast<unsigned>(ws[0]->group_size));
  launch(kernel, grid, 32 * row_warps * k_warps, 0, forms, form_vecs, T, segs, ws[0]->cols(), group_shift,
         row_warps, k_warps, tiles16);
}

template <int kBits, int kFolds, typename S>
void launch_rows_format(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                        std::span<float* const> outs, int k_warps) {
  const int64_t form_vecs = static_cast<int64_t>(form_bytes(kBits, ws[0]->cols()) / sizeof(uint4));
  float* part_outs[kMaxSegments];
  for (int64_t base = 0; base < T; base += kMaxTokens) {
    const int n = static_cast<int>(std::min<int64_t>(kMaxTokens, T - base));
    for (size_t i = 0; i < ws.size(); ++i) part_outs[i] = outs[i] + base * ws[i]->rows();
    const std::span<float* const> o(part_outs, ws.size());
    const uint4* f = forms + base * form_vecs;
    if (n <= 8) {
      launch_rows<kBits, kFolds, 1, S>(f, form_vecs, n, ws, o, k_warps);
    } else if (n <= 16) {
      launch_rows<kBits, kFolds, 2, S>(f, form_vecs, n, ws, o, k_warps);
    } else {
      launch_rows<kBits, kFolds, kMaxGroups, S>(f, form_vecs, n, ws, o, k_warps);
    }
  }
}

}  // namespace

void launch_gemv_rows(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                      std::span<float* const> outs, int k_warps) {
  with_weight_format(*ws[0], [&](auto bits, auto folds, auto s) {
    launch_rows_format<bits.value, folds.value, decltype(s)>(forms, T, ws, outs, k_warps);
  });
}

}  // namespace strata::backend::cuda
