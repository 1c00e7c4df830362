// Decode matmul of many activation rows (a batch's sequences, one token each) of MLX affine 4/8-bit
// weights on integer tensor cores, every row's outputs bit for bit what gemv_tc.cu's one-row kernel
// gives it alone, with the codes and the rows' activation forms staged in shared memory so that a
// block reads each once for all its warps.
//
// Why it matches. The one-row kernel's output is, for each k slice w of its launch and each of a
// k-tile's four runs r, an fp32 accumulator A[w][r] that folds the run's exact integer sums
// (gemv_math::limb_value, gemv_math::fold_run) tile after tile, t = w, w + k_warps, ...; then
// S[w] = (A[w][0] + A[w][1]) + (A[w][2] + A[w][3]); then 0 + S[0] + S[1] + ... in slice order.
// The accumulators are independent, so this kernel computes them one after another instead of
// together: a block walks (w, r, t) with w outermost and t innermost, each warp keeping only the
// accumulator of the current (w, r) for its outputs, A[w][0] + A[w][1] until A[w][2] + A[w][3] is
// ready, and the running sum over slices.
//
// Layout. A block of 8 warps takes a range of 16-row m-tiles (kRows rows) and all the launch's
// tokens (up to kTokens); warp (wr, wt) takes 32 rows (two m-tiles) × 8·kQ tokens. For a (w, r, t)
// step the block stages, with cp.async into one of kStages buffers, each row's 32 bytes of run r of
// tile t (halves swapped every 4 rows, so the lanes' reads hit distinct banks), each token's run of
// B vectors (gemv_math::b_vec, 16 bytes of padding between tokens) and its run info. A lane (g, c)
// then forms the A fragments of rows g and g + 8 of both m-tiles and the B fragments of token g of
// each group of 8, exactly as gemv_tc_rows.cu does from global memory, and folds the C elements
// (rows g, g + 8 × tokens 2c, 2c + 1) into the run's accumulators.
//
// Work. A matrix with blocks enough to fill the device runs every slice in each block and writes
// the outputs; a smaller one gives each block one slice (grid.y), the blocks write S[w] to a
// workspace, and a second launch adds the slices in order.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/gemv_math.h"
#include "backend/cuda/gemv_tc.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/scale_type.h"
#include "backend/cuda/segments.h"
#include "backend/tuning.h"

namespace strata::backend::cuda {

namespace {

using gemv_math::Geometry;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kStages = 4;
constexpr int kRunBytes = 32;   // a row's codes of one run in a k-tile
constexpr int kTokenPad = 16;   // bytes between two tokens' staged B vectors

// The block's shape and its shared memory: kQ groups of 8 tokens a warp, kTokenWarps warps across
// the tokens, the rest across the rows (32 each).
template <int kBits, int kQ, int kTokenWarps>
struct Staged {
  using G = Geometry<kBits>;
  static constexpr int kRowWarps = kWarps / kTokenWarps;
  static constexpr int kRows = 32 * kRowWarps;
  static constexpr int kUnits = kRows / 16;  // m-tiles
  static constexpr int kTokens = 8 * kQ * kTokenWarps;
  static constexpr int kBVecs = 2 * G::kSteps;  // uint4 of B vectors a token's run
  static constexpr int kTokenBytes = kBVecs * 16 + kTokenPad;
  static constexpr int kCodeBytes = kRows * kRunBytes;
  static constexpr int kBBytes = kTokens * kTokenBytes;
  static constexpr int kInfoBytes = kTokens * 16;
  static constexpr int kStageBytes = kCodeBytes + kBBytes + kInfoBytes;
  // Each lane's sums over runs and slices, kept in shared memory (only run ends touch them; the
  // registers go to the mmas in flight): A[w][0] + A[w][1], A[w][2], and the slices' running sum.
  static constexpr int kLaneFloats = 2 * kQ * 4;
  static constexpr int kSums = 3;
  static constexpr int kSharedBytes = kStages * kStageBytes + kSums * kThreads * kLaneFloats * 4;
  // Two blocks a multiprocessor where the smaller tile lets them (registers capped to fit).
  static constexpr int kMinBlocks = kQ <= 2 ? 2 : 1;
};

// Where a block's (w, r, t) walk stands: w over [w, w_end), r over the four runs, t over the
// slice's tiles.
struct Cursor {
  int w, w_end, r, k_warps;
  int64_t t, tiles;
  __device__ bool done() const { return w >= w_end; }
  __device__ bool last_tile() const { return t + k_warps >= tiles; }
  __device__ void advance() {
    t += k_warps;
    if (t < tiles) return;
    if (++r < 4) {
      t = w;
      return;
    }
    r = 0;
    t = ++w;
  }
};

template <int kBits, int kFolds, int kQ, int kTokenWarps, typename S>
__global__ void __launch_bounds__(kThreads, (Staged<kBits, kQ, kTokenWarps>::kMinBlocks))
    gemv_staged_kernel(const uint4* __restrict__ forms, int64_t form_vecs, int T, const WeightSegments segs,
                       int64_t K, int group_shift, int k_warps, unsigned tiles16, float* __restrict__ slices,
                       int64_t slice_rows) {
  using G = Geometry<kBits>;
  using L = Staged<kBits, kQ, kTokenWarps>;
  constexpr int kChunks = kBits == 4 ? 2 : 1;  // mmas of 32 codes a run
  constexpr uint32_t kLow = 0x0F0F0F0Fu;
  extern __shared__ uint4 smem[];
  unsigned char* stage_base = reinterpret_cast<unsigned char*>(smem);
  // [sum][value][thread]: each lane's values a bank apart from its neighbours'.
  float* sums = reinterpret_cast<float*>(stage_base + kStages * L::kStageBytes) + threadIdx.x;
  float* pair = sums;
  float* hold = sums + L::kLaneFloats * kThreads;
  float* total = sums + 2 * L::kLaneFloats * kThreads;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int wr = warp / kTokenWarps, wt = warp % kTokenWarps;
  const int64_t tiles = K / G::kTileK, row_bytes = K * kBits / 8, groups = K >> group_shift;
  const unsigned unit0 = blockIdx.x * L::kUnits;
  const bool one_slice = slices != nullptr;
  const int token0_block = static_cast<int>(blockIdx.z) * L::kTokens;  // the block's first token
  const float4* info_base = reinterpret_cast<const float4*>(forms + tiles * G::kTileVecs);

  // A block row's segment and row there; rows past the matrices re-read a valid row, never stored.
  auto source_row = [&](int block_row, const WeightSegment*& seg) {
    const unsigned m = min(unit0 + block_row / 16, tiles16 - 1);
    seg = &unit_segment(segs, m);
    return min(static_cast<int64_t>(m - seg->first_unit) * 16 + block_row % 16, seg->n - 1);
  };

  // This thread's copies: code halves of rows, B vectors and run info of tokens (tokens past T
  // re-read the last).
  constexpr int kCodeCopies = L::kRows * 2 / kThreads;  // 1 or 2
  const uint8_t* code_src[kCodeCopies];
  int code_dst[kCodeCopies];
#pragma unroll
  for (int j = 0; j < kCodeCopies; ++j) {
    const int i = threadIdx.x + j * kThreads, row = i / 2, half = i % 2;
    const WeightSegment* seg;
    const int64_t src_row = source_row(row, seg);
    code_src[j] = static_cast<const uint8_t*>(seg->codes) + src_row * row_bytes + half * 16;
    code_dst[j] = row * kRunBytes + (half ^ ((row >> 2) & 1)) * 16;
  }

  // The lane's rows for the scales: m-tile mg of the warp, row g + 8h.
  const S* scale_row[2][2];
  const S* bias_row[2][2];
#pragma unroll
  for (int mg = 0; mg < 2; ++mg)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const WeightSegment* seg;
      const int64_t row = source_row(wr * 32 + mg * 16 + g + 8 * h, seg);
      scale_row[mg][h] = static_cast<const S*>(seg->scales) + row * groups;
      bias_row[mg][h] = static_cast<const S*>(seg->biases) + row * groups;
    }

  Cursor load_at{one_slice ? static_cast<int>(blockIdx.y) : 0, one_slice ? static_cast<int>(blockIdx.y) + 1 : k_warps,
                 0, k_warps, 0, tiles};
  load_at.t = load_at.w;
  Cursor at = load_at;

  // B vectors and run info: the thread's copies' offsets from a step's first (uint4 from forms,
  // float4 from info_base) and into the stage (bytes).
  constexpr int kBItems = L::kTokens * L::kBVecs;
  constexpr int kBCopies = (kBItems + kThreads - 1) / kThreads;
  uint32_t b_src[kBCopies], b_dst[kBCopies];
#pragma unroll
  for (int j = 0; j < kBCopies; ++j) {
    const int i = min(static_cast<int>(threadIdx.x) + j * kThreads, kBItems - 1);
    const int token = i / L::kBVecs, v = i % L::kBVecs;
    b_src[j] = static_cast<uint32_t>(min(token0_block + token, T - 1) * form_vecs + v);
    b_dst[j] = static_cast<uint32_t>(L::kCodeBytes + token * L::kTokenBytes + v * 16);
  }
  const bool copies_info = static_cast<int>(threadIdx.x) < L::kTokens;
  const uint32_t info_src = static_cast<uint32_t>(min(token0_block + static_cast<int>(threadIdx.x), T - 1) * form_vecs);
  const uint32_t info_dst = static_cast<uint32_t>(L::kCodeBytes + L::kBBytes + threadIdx.x * 16);

  auto issue = [&](const Cursor& p, int stage) {
    unsigned char* s = stage_base + stage * L::kStageBytes;
    const int64_t code_off = p.t * gemv_math::kTileBytes + p.r * kRunBytes;
#pragma unroll
    for (int j = 0; j < kCodeCopies; ++j) copy_async16(s + code_dst[j], code_src[j] + code_off);
    const uint4* b = forms + (p.t * G::kTileVecs + p.r * L::kBVecs);
#pragma unroll
    for (int j = 0; j < kBCopies; ++j)
      if (kBItems % kThreads == 0 || static_cast<int>(threadIdx.x) + j * kThreads < kBItems)
        copy_async16(s + b_dst[j], b + b_src[j]);
    if (copies_info) copy_async16(s + info_dst, info_base + (p.t * 4 + p.r) + info_src);
  };

  struct Scales {
    float s[2][2][kFolds], b[2][2][kFolds];
  };
  auto load_scales = [&](const Cursor& p, Scales& out) {
    if (p.done()) return;
#pragma unroll
    for (int f = 0; f < kFolds; ++f) {
      // As the one-row kernel finds a run's group: its tile's, its run's within, the fold's.
      const int64_t gi = ((p.t * G::kTileK) >> group_shift) + ((p.r * G::kRun) >> group_shift) + f;
#pragma unroll
      for (int mg = 0; mg < 2; ++mg)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          out.s[mg][h][f] = scale_to_float(scale_row[mg][h][gi]);
          out.b[mg][h][f] = scale_to_float(bias_row[mg][h][gi]);
        }
    }
  };

  wait_for_inputs_then_release();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (!load_at.done()) {
      issue(load_at, s);
      load_at.advance();
    }
    copy_async_commit();
  }

  float acc[2][kQ][4];
#pragma unroll
  for (int mg = 0; mg < 2; ++mg)
#pragma unroll
    for (int q = 0; q < kQ; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mg][q][e] = 0.0f;
#pragma unroll
  for (int k = 0; k < L::kLaneFloats; ++k) total[k * kThreads] = 0.0f;

  Scales cur;
  load_scales(at, cur);
  int stage = 0;
  while (!at.done()) {
    copy_async_wait<kStages - 2>();
    __syncthreads();  // the stage is in, and every warp is past the stage the next copies reuse
    if (!load_at.done()) {
      issue(load_at, (stage + kStages - 1) % kStages);
      load_at.advance();
    }
    copy_async_commit();
    Cursor next = at;
    next.advance();
    Scales nxt = cur;
    load_scales(next, nxt);

    const unsigned char* s = stage_base + stage * L::kStageBytes;
    const uint32_t* code_words = reinterpret_cast<const uint32_t*>(s);
    const unsigned char* bs = s + L::kCodeBytes;
    const float4* info = reinterpret_cast<const float4*>(bs + L::kBBytes);

    // A fragments of rows g and g + 8 of the warp's two m-tiles, as gemv_tc_rows.cu forms them.
    uint32_t a[2][kChunks][4];
#pragma unroll
    for (int mg = 0; mg < 2; ++mg) {
      const int row0 = wr * 32 + mg * 16 + g, swz = (row0 >> 2) & 1;  // row0 + 8 has the same swap
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        if constexpr (kBits == 4) {
          const int word = (i ^ swz) * 4 + c;  // step 4i + c
          const uint32_t w0 = code_words[row0 * 8 + word], w1 = code_words[(row0 + 8) * 8 + word];
          a[mg][i][0] = w0 & kLow, a[mg][i][1] = w1 & kLow, a[mg][i][2] = (w0 >> 4) & kLow,
          a[mg][i][3] = (w1 >> 4) & kLow;
        } else {
          const int word = ((c >> 1) ^ swz) * 4 + (2 * c) % 4;  // step c: bytes 8c..8c+7
          const uint2 u0 = *reinterpret_cast<const uint2*>(code_words + row0 * 8 + word);
          const uint2 u1 = *reinterpret_cast<const uint2*>(code_words + (row0 + 8) * 8 + word);
          a[mg][i][0] = u0.x, a[mg][i][1] = u1.x, a[mg][i][2] = u0.y, a[mg][i][3] = u1.y;
        }
      }
    }

#pragma unroll
    for (int q = 0; q < kQ; ++q) {
      const int token0 = wt * 8 * kQ + 8 * q;
      const float4 run[2] = {info[token0 + 2 * c], info[token0 + 2 * c + 1]};
      uint4 v[kChunks][2];
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int step = kBits == 4 ? 4 * i + c : c;
        const uint4* b = reinterpret_cast<const uint4*>(bs + (token0 + g) * L::kTokenBytes) + step * 2;
        v[i][0] = b[0];
        v[i][1] = b[1];
      }
#pragma unroll
      for (int mg = 0; mg < 2; ++mg) {
        int top[4] = {}, mid[4] = {}, low[4] = {};
#pragma unroll
        for (int i = 0; i < kChunks; ++i) {
          gemv_math::imma(top, a[mg][i][0], a[mg][i][1], a[mg][i][2], a[mg][i][3], v[i][0].x, v[i][0].y);
          gemv_math::imma(low, a[mg][i][0], a[mg][i][1], a[mg][i][2], a[mg][i][3], v[i][0].z, v[i][0].w);
          gemv_math::imma(mid, a[mg][i][0], a[mg][i][1], a[mg][i][2], a[mg][i][3], v[i][1].x, v[i][1].y);
          // A fold is a chunk at 4 bits in groups of 32, else the whole run.
          if (kFolds == 2 || i == kChunks - 1) {
            const int fold = kFolds == 2 ? i : 0;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int h = e / 2;
              const float4& in = run[e % 2];
              const float val = gemv_math::limb_value(top[e], mid[e], low[e]);
              acc[mg][q][e] = gemv_math::fold_run(acc[mg][q][e], val, cur.s[mg][h][fold], in.x, cur.b[mg][h][fold],
                                                  fold == 0 ? in.y : in.z);
              top[e] = mid[e] = low[e] = 0;
            }
          }
        }
      }
    }

    if (at.last_tile()) {
      // The run's accumulators are complete: S[w] = (A0 + A1) + (A2 + A3), then the slices in order
      // (here, or for one slice a block, by add_slices_kernel from the workspace).
      const int r = at.r;
#pragma unroll
      for (int mg = 0; mg < 2; ++mg)
#pragma unroll
        for (int q = 0; q < kQ; ++q)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int k = ((mg * kQ + q) * 4 + e) * kThreads;
            float& x = acc[mg][q][e];
            if (r == 0 || r == 2) {
              hold[k] = x;
            } else if (r == 1) {
              pair[k] = hold[k] + x;
            } else {
              const float sum = pair[k] + (hold[k] + x);
              if (!one_slice) {
                total[k] = total[k] + sum;
              } else {
                // [token][row over the m-tiles]; tokens past T dropped.
                const int token = token0_block + wt * 8 * kQ + 8 * q + 2 * c + e % 2;
                const int64_t row = static_cast<int64_t>(unit0) * 16 + wr * 32 + mg * 16 + g + 8 * (e / 2);
                if (token < T && row < slice_rows)
                  slices[(static_cast<int64_t>(at.w) * T + token) * slice_rows + row] = sum;
              }
            }
            x = 0.0f;
          }
    }
    cur = nxt;
    at = next;
    stage = (stage + 1) % kStages;
  }
  copy_async_wait_all();

  if (!one_slice) {
#pragma unroll
    for (int mg = 0; mg < 2; ++mg)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned m = unit0 + wr * 2 + mg;
        if (m >= tiles16) continue;
        const WeightSegment& seg = unit_segment(segs, m);
        const int64_t row = static_cast<int64_t>(m - seg.first_unit) * 16 + g + 8 * (e / 2);
        if (row >= seg.n) continue;
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
          const int token = token0_block + wt * 8 * kQ + 8 * q + 2 * c + e % 2;
          if (token < T) seg.out[token * seg.n + row] = total[((mg * kQ + q) * 4 + e) * kThreads];
        }
      }
  }
}

// The outputs from the slices' sums S[w] ([w][token][row over the m-tiles]): 0 + S[0] + S[1] + ...,
// as the one-row kernel adds its k slices.
__global__ void add_slices_kernel(const float* __restrict__ slices, int64_t slice_rows, int T, int k_warps,
                                  const WeightSegments segs) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slice_rows * T) return;
  const int token = static_cast<int>(i / slice_rows);
  const int64_t at = i % slice_rows;
  const unsigned m = static_cast<unsigned>(at / 16);
  const WeightSegment& seg = unit_segment(segs, m);
  const int64_t row = static_cast<int64_t>(m - seg.first_unit) * 16 + at % 16;
  if (row >= seg.n) return;
  float r = 0.0f;
  for (int w = 0; w < k_warps; ++w) r += slices[(static_cast<int64_t>(w) * T + token) * slice_rows + at];
  seg.out[token * seg.n + row] = r;
}

template <int kBits, int kFolds, int kQ, int kTokenWarps, typename S>
void launch_staged(const uint4* forms, int64_t form_vecs, int T, std::span<const Weight* const> ws,
                   std::span<float* const> outs, int k_warps) {
  using L = Staged<kBits, kQ, kTokenWarps>;
  auto* kernel = gemv_staged_kernel<kBits, kFolds, kQ, kTokenWarps, S>;
  static const bool raised = [&] {
    allow_shared_bytes(kernel, L::kSharedBytes);
    return true;
  }();
  (void)raised;
  WeightSegments segs;
  const unsigned tiles16 = make_segments(ws, outs, 16, segs);
  const unsigned row_blocks = (tiles16 + L::kUnits - 1) / L::kUnits;
  const unsigned token_blocks = static_cast<unsigned>((T + L::kTokens - 1) / L::kTokens);
  const int64_t K = ws[0]->cols();
  const int group_shift = __builtin_ctz(static_cast<unsigned>(ws[0]->group_size));
  // One slice a block when the whole walk a block would leave most of the device idle: waves of
  // blocks × the steps each takes, the slices' version paying one more wave for their sums.
  const unsigned sms = static_cast<unsigned>(sm_count());
  const int64_t tiles = K / Geometry<kBits>::kTileK;
  const unsigned slots = sms * L::kMinBlocks, blocks = row_blocks * token_blocks;
  const int64_t whole = (blocks + slots - 1) / slots * tiles;
  const int64_t split = ((blocks * k_warps + slots - 1) / slots + 1) * ((tiles + k_warps - 1) / k_warps);
  const int forced = tuning().gemv_staged_split;
  if (k_warps == 1 || forced == 2 || (forced == 0 && whole <= split)) {
    launch(kernel, dim3(row_blocks, 1, token_blocks), kThreads, L::kSharedBytes, forms, form_vecs, T, segs, K, group_shift, k_warps,
           tiles16, static_cast<float*>(nullptr), int64_t{0});
    return;
  }
  const int64_t slice_rows = static_cast<int64_t>(tiles16) * 16;
  auto* slices = static_cast<float*>(
      workspace(WorkspaceSlot::kMatmulSlices, sizeof(float) * static_cast<size_t>(slice_rows * T * k_warps)));
  launch(kernel, dim3(row_blocks, static_cast<unsigned>(k_warps), token_blocks), kThreads, L::kSharedBytes, forms, form_vecs, T,
         segs, K, group_shift, k_warps, tiles16, slices, slice_rows);
  const int64_t n = slice_rows * T;
  launch(add_slices_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<const float*>(slices),
         slice_rows, T, k_warps, segs);
}

template <int kBits, int kFolds, typename S>
void launch_staged_format(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                          std::span<float* const> outs, int k_warps) {
  const int64_t form_vecs = static_cast<int64_t>(form_bytes(kBits, ws[0]->cols()) / sizeof(uint4));
  constexpr int kMaxTokens = 64;
  float* part_outs[kMaxSegments];
  for (int64_t base = 0; base < T; base += kMaxTokens) {
    const int n = static_cast<int>(std::min<int64_t>(kMaxTokens, T - base));
    for (size_t i = 0; i < ws.size(); ++i) part_outs[i] = outs[i] + base * ws[i]->rows();
    const std::span<float* const> o(part_outs, ws.size());
    const uint4* f = forms + base * form_vecs;
    // Tokens a block: 16 (256 rows, two blocks a multiprocessor), 32 (128 rows, two blocks) or 64
    // (128 rows, one block, its warps 32 tokens wide), the fastest for each batch on an H200
    // (bench_cuda_gemv); Tuning::gemv_staged_tokens for tuning.
    const int forced = tuning().gemv_staged_tokens;
    const int wide = forced != 0 ? forced : n <= 16 ? 16 : n <= 32 ? 32 : 64;
    if (wide == 16) {
      launch_staged<kBits, kFolds, 2, 1, S>(f, form_vecs, n, ws, o, k_warps);
    } else if (wide == 32) {
      launch_staged<kBits, kFolds, 2, 2, S>(f, form_vecs, n, ws, o, k_warps);
    } else {
      launch_staged<kBits, kFolds, 4, 2, S>(f, form_vecs, n, ws, o, k_warps);
    }
  }
}

}  // namespace

void launch_gemv_staged(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                        std::span<float* const> outs, int k_warps) {
  with_weight_format(*ws[0], [&](auto bits, auto folds, auto s) {
    launch_staged_format<bits.value, folds.value, decltype(s)>(forms, T, ws, outs, k_warps);
  });
}

}  // namespace strata::backend::cuda
