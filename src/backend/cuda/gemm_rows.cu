// The matmul of up to 64 activation rows on MLX 4-bit weights where the GEMM takes them (a decode
// batch of more than 24 sequences when batch invariance is off, Tuning::batch_invariant false; a
// short prompt chunk where the tensor-core decode kernels do not run): the codes dequantized in
// registers straight into bf16 tensor-core fragments, so the weights are read once, as codes,
// instead of being written out as a bf16 copy and read again (the prefill GEMM's way, whose cost at
// these rows is that copy).
//
// Numerics are the prefill GEMM's: each weight s·q + b rounded once to bf16, x rounded to bf16,
// products summed in fp32 (mma.sync m16n8k16); only the order of the sums differs, and with it a
// row's last bits depend on the batch's size.
//
// Dequantizing is most of a warp's instructions, so for bf16 scales (MLX's usual) it takes four
// a pair of weights: a shift, one logic op that puts two codes into the mantissas of the bf16 pair
// (128 + q, 128 + q'), an exact bf16x2 subtraction of 128 and a bf16x2 fma of s and b (rounded
// once, as above). The two codes one logic op reaches are 4 apart in a word (bits 4t and 4t + 16),
// not the neighbours an mma's fragment pairs, so x is stored in the same order: in every 8 values,
// x0 x4 x1 x5 x2 x6 x3 x7 (gemm_rows_activations); a sum over k does not care which slot holds
// which k as long as the weight and x agree. Other scale types take the fp32 way, in x's order.
//
// A block of 4 warps takes 128 weight rows and every token; each warp 32 rows (two m16 tiles)
// against all of them (up to eight n8 tiles). A k chunk of 64 codes per row and the tokens' 64
// bf16 values stage through shared memory with cp.async, kStages chunks in flight; each warp reads
// its rows' codes for a k step (8 bytes a row), dequantizes them with its rows' scale and bias
// (loaded a chunk ahead) and multiplies them with the tokens' fragments (ldmatrix). Matrices with
// too few row blocks to fill the device split K; the splits' sums are added in order by a second
// launch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/bf16_pack.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm_rows.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma.h"
#include "backend/cuda/scale_type.h"

namespace strata::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = 32;                    // two m16 tiles
constexpr int kBlockRows = kWarps * kWarpRows;   // 128
constexpr int kChunk = 64;                       // k per stage
constexpr int kStages = 4;
constexpr int kCodePitch = 48;   // bytes a staged row of codes takes (32 used): conflict-free reads
constexpr int kXPitch = kChunk + 8;  // bf16 a staged token row takes: conflict-free ldmatrix
constexpr int kMinChunksPerSplit = 4;

template <int kTiles>  // n8 tiles of tokens
struct Stage {
  uint8_t codes[kBlockRows * kCodePitch];
  __nv_bfloat16 x[kTiles * 8 * kXPitch];
};

// One weight of a launch: its rows are row blocks first_block.. of the grid, and its outputs
// columns col0.. of the splits' sums.
template <typename S>
struct Matrix {
  const uint32_t* codes;  // [N, K / 8]
  const S* scales;        // [N, K / group]
  const S* biases;
  float* out;             // [T, N]
  int N, first_block, col0;
};

constexpr int kMaxMatrices = 4;  // weights of equal K, group size and scale type in one launch

template <typename S>
struct Params {
  Matrix<S> m[kMaxMatrices];
  int matrices;
  const __nv_bfloat16* x;  // [T, K]
  float* sums;             // with more than one split: the splits' sums [splits, T, cols]
  int T, K, cols, group_shift, chunks_per_split;
};

// This thread's share of a stage's copies, fixed for the kernel: for each piece (16 bytes of a
// row's codes, or of a token's x) where it lands in a stage and where it starts at k = 0, as
// offsets (a chunk adds k0 / 8 words of codes, k0 values of x); a row past N or a token past T
// reads nothing and lands as zeros.
template <int kTiles>
struct Copies {
  static constexpr int kCode = kBlockRows * 2 / kThreads;  // pieces of codes (2 a row)
  static constexpr int kX = kTiles * 8 * 8 / kThreads;    // pieces of x (8 a token)
  int code_src[kCode], code_dst[kCode], x_src[kX], x_dst[kX];
  bool code_in[kCode], x_in[kX];
};

template <int kTiles, typename S>
__device__ inline Copies<kTiles> copies_of(const Params<S>& p, const Matrix<S>& w, int row0) {
  Copies<kTiles> c;
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kCode; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i / 2, half = i % 2, row = row0 + r;
    c.code_in[j] = row < w.N;
    c.code_src[j] = (c.code_in[j] ? row : 0) * (p.K / 8) + half * 4;
    c.code_dst[j] = r * kCodePitch + half * 16;
  }
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kX; ++j) {
    const int i = threadIdx.x + j * kThreads, t = i / 8, piece = i % 8;
    c.x_in[j] = t < p.T;
    c.x_src[j] = (c.x_in[j] ? t : 0) * p.K + piece * 8;
    c.x_dst[j] = t * kXPitch + piece * 8;
  }
  return c;
}

// Copies chunk `c` (k from c · kChunk) of the block's rows' codes into a stage.
template <int kTiles>
__device__ inline void load_codes(Stage<kTiles>& st, const uint32_t* codes, const Copies<kTiles>& cp, int c) {
  const int k0 = c * kChunk;
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kCode; ++j)
    copy_async16(st.codes + cp.code_dst[j], codes + cp.code_src[j] + k0 / 8, cp.code_in[j] ? 16 : 0);
}

// The same for every token's x.
template <int kTiles>
__device__ inline void load_x(Stage<kTiles>& st, const __nv_bfloat16* x, const Copies<kTiles>& cp, int c) {
  const int k0 = c * kChunk;
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kX; ++j)
    copy_async16(st.x + cp.x_dst[j], x + cp.x_src[j] + k0, cp.x_in[j] ? 16 : 0);
}

// Whether weights with scales of type S take the paired dequantization (and x in paired order).
template <typename S>
constexpr bool kPaired = std::is_same_v<S, __nv_bfloat16>;

// A scale or bias as the dequantization takes it: for the paired way the bf16 twice (both halves
// of a bf16x2), else fp32.
template <typename S>
using Affine = std::conditional_t<kPaired<S>, uint32_t, float>;

template <typename S>
__device__ inline Affine<S> affine_of(S v) {
  if constexpr (kPaired<S>) {
    const uint32_t bits = __bfloat16_as_ushort(v);
    return bits | (bits << 16);
  } else {
    return scale_to_float(v);
  }
}

// The scale and bias of this lane's four rows (warp rows g, g + 8, g + 16, g + 24; their first
// group at `first`) for chunk c's k steps: step j's group is (k0 + 16 j) >> group_shift, kHalves
// of them a chunk (2 for groups of 32, else 1); index [row][half of the chunk].
// They are loaded a chunk ahead as they are stored (load_affine) and put in the dequantization's
// form (to_affine) only when the chunk comes, so nothing waits on the loads in between.
template <int kHalves, typename S>
__device__ inline void load_affine(const Matrix<S>& w, int group_shift, const int (&first)[4], int c,
                                   S (&s)[4][kHalves], S (&b)[4][kHalves]) {
  const int g0 = (c * kChunk) >> group_shift;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      s[r][h] = __ldg(w.scales + first[r] + g0 + h);
      b[r][h] = __ldg(w.biases + first[r] + g0 + h);
    }
}

template <int kHalves, typename S>
__device__ inline void to_affine(const S (&s)[4][kHalves], const S (&b)[4][kHalves], Affine<S> (&as)[4][kHalves],
                                 Affine<S> (&ab)[4][kHalves]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      as[r][h] = affine_of(s[r][h]);
      ab[r][h] = affine_of(b[r][h]);
    }
}

// The two weights of one row whose codes are the low byte of v (q0 in its low nibble, q1 in its
// high one), as a bf16 pair. q1 is read in place, as 16·q1, and scaled by s/16 (exact): s·q1 is
// the same product, so each weight is fmaf(s, q, b) rounded once, one shift fewer.
__device__ inline uint32_t dequant2(uint32_t v, float s, float s16, float b) {
  const float q0 = __uint_as_float(0x4B000000u | (v & 0x0Fu)) - 8388608.0f;
  const float q1x16 = __uint_as_float(0x4B000000u | (v & 0xF0u)) - 8388608.0f;
  return pack_bf16x2(__fmaf_rn(s, q0, b), __fmaf_rn(s16, q1x16, b));
}

// The paired way: v is a word of codes shifted right by 4t, codes t and t + 4 in bits 0-3 and
// 16-19; the bf16 pair (s·q_t + b, s·q_{t+4} + b).
__device__ inline uint32_t dequant_pair(uint32_t v, uint32_t s2, uint32_t b2) {
  constexpr uint32_t kMagic = 0x43004300u;  // bf16 128.0 twice: 128 + q keeps q in the mantissa
  const uint32_t biased = (v & 0x000F000Fu) | kMagic;
  __nv_bfloat162 q, magic, s, b;
  memcpy(&q, &biased, 4);
  memcpy(&magic, &kMagic, 4);
  memcpy(&s, &s2, 4);
  memcpy(&b, &b2, 4);
  const __nv_bfloat162 w = __hfma2(__hsub2(q, magic), s, b);
  uint32_t out;
  memcpy(&out, &w, 4);
  return out;
}

// A warp's A fragments for k step j of a stage: rows g and g + 8 of each of its two m16 tiles,
// their codes at `codes` (the warp's first staged row), their scales and biases s, b ([row][half]).
template <int kHalves, typename S>
__device__ inline void dequant_step(const uint8_t* codes, int j, int g, int t, const Affine<S> (&s)[4][kHalves],
                                    const Affine<S> (&b)[4][kHalves], uint32_t (&a)[2][4]) {
  const int h = kHalves == 2 ? j / 2 : 0;  // the chunk's half: its second group when groups are 32
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const uint2 lo = *reinterpret_cast<const uint2*>(codes + (16 * m + g) * kCodePitch + 8 * j);
    const uint2 hi = *reinterpret_cast<const uint2*>(codes + (16 * m + g + 8) * kCodePitch + 8 * j);
    const Affine<S> sl = s[2 * m][h], bl = b[2 * m][h], sh8 = s[2 * m + 1][h], bh8 = b[2 * m + 1][h];
    if constexpr (kPaired<S>) {
      const int sh = 4 * t;
      a[m][0] = dequant_pair(lo.x >> sh, sl, bl);
      a[m][1] = dequant_pair(hi.x >> sh, sh8, bh8);
      a[m][2] = dequant_pair(lo.y >> sh, sl, bl);
      a[m][3] = dequant_pair(hi.y >> sh, sh8, bh8);
    } else {
      const int sh = 8 * t;
      const float sl16 = sl * 0.0625f, sh16 = sh8 * 0.0625f;
      a[m][0] = dequant2(lo.x >> sh, sl, sl16, bl);
      a[m][1] = dequant2(hi.x >> sh, sh8, sh16, bh8);
      a[m][2] = dequant2(lo.y >> sh, sl, sl16, bl);
      a[m][3] = dequant2(hi.y >> sh, sh8, sh16, bh8);
    }
  }
}

// kHalves: groups a chunk (2 for groups of 32, else 1).
template <int kTiles, int kHalves, typename S>
__global__ void __launch_bounds__(kThreads, 3) gemm_rows_kernel(const Params<S> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stages = reinterpret_cast<Stage<kTiles>*>(smem);
  int which = 0;  // the block's weight
#pragma unroll
  for (int i = 1; i < kMaxMatrices; ++i)
    if (i < p.matrices && static_cast<int>(blockIdx.x) >= p.m[i].first_block) which = i;
  const Matrix<S> w = p.m[which];  // in registers (indexing the parameters reloads them)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = (blockIdx.x - w.first_block) * kBlockRows, warp_row0 = row0 + warp * kWarpRows;
  const int chunks = p.K / kChunk;
  const int c0 = blockIdx.y * p.chunks_per_split, c1 = min(chunks, c0 + p.chunks_per_split);

  // The weights need nothing from the kernels before this one: their first stages' codes and the
  // first chunk's scales are on their way before the wait (launch.h). Each stage's x follows after
  // it, one commit group a stage (the first group also holds every early code copy).
  const Copies<kTiles> cp = copies_of<kTiles>(p, w, row0);
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i)
    if (c0 + i < c1) load_codes(stages[i], w.codes, cp, c0 + i);
  int first[4];  // the first group of each of this lane's rows (past N: the last row's)
#pragma unroll
  for (int r = 0; r < 4; ++r) first[r] = min(warp_row0 + g + 8 * r, w.N - 1) * (p.K >> p.group_shift);
  S ns[4][kHalves], nb[4][kHalves];  // the next chunk's scales and biases, as stored
  load_affine<kHalves>(w, p.group_shift, first, c0, ns, nb);
  wait_for_inputs();
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (c0 + i < c1) load_x(stages[i], p.x, cp, c0 + i);
    copy_async_commit();
  }

  float acc[2][kTiles][4] = {};
  for (int c = c0; c < c1; ++c) {
    copy_async_wait<kStages - 2>();
    __syncthreads();  // chunk c landed for every thread; the stage chunk c - 1 used is free
    if (c + kStages - 1 < c1) {
      Stage<kTiles>& next = stages[(c - c0 + kStages - 1) % kStages];
      load_codes(next, w.codes, cp, c + kStages - 1);
      load_x(next, p.x, cp, c + kStages - 1);
    }
    copy_async_commit();
    const Stage<kTiles>& st = stages[(c - c0) % kStages];
    Affine<S> s[4][kHalves], b[4][kHalves];  // this chunk's
    to_affine<kHalves>(ns, nb, s, b);
    if (c + 1 < c1) load_affine<kHalves>(w, p.group_shift, first, c + 1, ns, nb);  // in flight meanwhile
#pragma unroll
    for (int j = 0; j < kChunk / 16; ++j) {
      uint32_t a[2][4];
      dequant_step<kHalves, S>(st.codes + warp * kWarpRows * kCodePitch, j, g, t, s, b, a);
#pragma unroll
      for (int n = 0; n < kTiles; n += 2) {
        // Matrices: tile n's k 0-7 and 8-15 of this step, then tile n + 1's.
        const int tok = (n + lane / 16) * 8 + lane % 8;
        uint32_t x4[4];
        ldmatrix_x4(x4, st.x + tok * kXPitch + 16 * j + 8 * ((lane / 8) % 2));
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          mma_bf16(acc[m][n], a[m], x4[0], x4[1]);
          if (n + 1 < kTiles) mma_bf16(acc[m][n + 1], a[m], x4[2], x4[3]);
        }
      }
    }
  }
  copy_async_wait_all();

  // One split: the weight's own outputs [T, N]; else this split's columns of the sums.
  const bool whole = p.sums == nullptr;
  float* dst = whole ? w.out : p.sums + static_cast<int64_t>(blockIdx.y) * p.T * p.cols + w.col0;
  const int64_t pitch = whole ? w.N : p.cols;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = warp_row0 + 16 * m + g + 8 * (e / 2), tok = 8 * n + 2 * t + e % 2;
        if (row < w.N && tok < p.T) dst[tok * pitch + row] = acc[m][n][e];
      }
}

// x rounded to bf16 in the paired way's order: out's 8 values at 8i are x[8i + 0, 4, 1, 5, 2, 6,
// 3, 7] (x need not be 16-byte aligned: a view into the middle of a buffer).
__global__ void to_bf16_paired_kernel(const float* __restrict__ x, int64_t n8, uint4* __restrict__ out) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n8) return;
  const float* v = x + 8 * i;
  out[i] = make_uint4(pack_bf16x2(v[0], v[4]), pack_bf16x2(v[1], v[5]), pack_bf16x2(v[2], v[6]),
                      pack_bf16x2(v[3], v[7]));
}

// Each weight's outputs: the splits' sums [splits, T, cols] of its columns, added in split order.
template <typename S>
__global__ void add_splits_kernel(const Params<S> p, int splits) {
  wait_for_inputs();
  const int64_t n = static_cast<int64_t>(p.T) * p.cols;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int tok = static_cast<int>(i / p.cols), col = static_cast<int>(i % p.cols);
  int which = 0;
#pragma unroll
  for (int k = 1; k < kMaxMatrices; ++k)
    if (k < p.matrices && col >= p.m[k].col0) which = k;
  const Matrix<S> w = p.m[which];  // in registers (indexing the parameters reloads them)
  float v = p.sums[i];
  for (int s = 1; s < splits; ++s) v += p.sums[s * n + i];
  w.out[static_cast<int64_t>(tok) * w.N + (col - w.col0)] = v;
}

template <int kTiles, int kHalves, typename S>
void launch_rows(const Params<S>& p, int row_blocks, int splits) {
  constexpr size_t kSmem = kStages * sizeof(Stage<kTiles>);
  auto* const kernel = gemm_rows_kernel<kTiles, kHalves, S>;
  static const bool sized = [&] {
    allow_shared_bytes(kernel, kSmem);
    return true;
  }();
  (void)sized;
  launch(kernel, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits)), kThreads, kSmem, p);
}

template <int kHalves, typename S>
void launch_tiles(const Params<S>& p, int row_blocks, int splits) {
  switch ((p.T + 7) / 8) {
    case 4: launch_rows<4, kHalves, S>(p, row_blocks, splits); break;
    case 5:
    case 6: launch_rows<6, kHalves, S>(p, row_blocks, splits); break;
    case 7:
    case 8: launch_rows<8, kHalves, S>(p, row_blocks, splits); break;
    default: launch_rows<4, kHalves, S>(p, row_blocks, splits); break;  // 17 to 32 tokens (and fewer)
  }
}

template <typename S>
void gemm_rows_group(const __nv_bfloat16* xb, int64_t T, std::span<const Weight* const> ws,
                     std::span<const Tensor> outs) {
  const int64_t K = ws[0]->cols();
  Params<S> p{};
  int row_blocks = 0, cols = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const int N = static_cast<int>(ws[i]->rows());
    p.m[i] = Matrix<S>{ws[i]->w.as<const uint32_t>(), ws[i]->scales.as<const S>(), ws[i]->biases.as<const S>(),
                       outs[i].as<float>(), N, row_blocks, cols};
    row_blocks += (N + kBlockRows - 1) / kBlockRows;
    cols += N;
  }
  p.matrices = static_cast<int>(ws.size());
  const int chunks = static_cast<int>(K / kChunk);
  // Splits for about one wave of three blocks a multiprocessor, each at least kMinChunksPerSplit
  // chunks long.
  const int want = std::max(1, 3 * sm_count() / row_blocks);
  const int splits = std::max(1, std::min(want, chunks / kMinChunksPerSplit));
  p.x = xb;
  p.T = static_cast<int>(T);
  p.K = static_cast<int>(K);
  p.cols = cols;
  p.group_shift = std::countr_zero(static_cast<unsigned>(ws[0]->group_size));
  p.chunks_per_split = (chunks + splits - 1) / splits;
  const int used = (chunks + p.chunks_per_split - 1) / p.chunks_per_split;  // splits with chunks
  p.sums = used == 1 ? nullptr
                     : static_cast<float*>(workspace(WorkspaceSlot::kMatmulSlices,
                                                     static_cast<size_t>(used) * T * cols * sizeof(float)));
  if (ws[0]->group_size == 32) {
    launch_tiles<2, S>(p, row_blocks, used);
  } else {
    launch_tiles<1, S>(p, row_blocks, used);
  }
  if (used > 1) {
    const int64_t n = T * cols;
    launch(add_splits_kernel<S>, static_cast<unsigned>((n + 255) / 256), 256, 0, p, used);
  }
}

}  // namespace

bool gemm_rows_paired(const Weight& w) { return w.scales.dtype == DType::kBF16; }

const __nv_bfloat16* gemm_rows_activations(const Tensor& x, int64_t n) {
  auto* xp = static_cast<uint4*>(
      workspace(WorkspaceSlot::kMatmulBPaired, static_cast<size_t>(n) * sizeof(__nv_bfloat16)));
  constexpr int kConvertThreads = 256;
  launch(to_bf16_paired_kernel, static_cast<unsigned>((n / 8 + kConvertThreads - 1) / kConvertThreads),
         kConvertThreads, 0, x.as<const float>(), n / 8, xp);
  return reinterpret_cast<const __nv_bfloat16*>(xp);
}

bool gemm_rows_supported(const Weight& w, int64_t rows) {
  return w.quantized() && w.bits == 4 && (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) &&
         w.cols() % kChunk == 0 && rows >= 1 && rows <= kGemmRowsMax;
}

bool gemm_rows_fusable(std::span<const Weight* const> ws) {
  if (ws.empty() || ws.size() > static_cast<size_t>(kMaxMatrices)) return false;
  for (const Weight* w : ws)
    if (w->cols() != ws[0]->cols() || w->group_size != ws[0]->group_size ||
        w->scales.dtype != ws[0]->scales.dtype)
      return false;
  return true;
}

void gemm_rows(const __nv_bfloat16* xb, int64_t T, std::span<const Weight* const> ws, std::span<const Tensor> outs) {
  with_scale_type(*ws[0], [&](auto s) { gemm_rows_group<decltype(s)>(xb, T, ws, outs); });
}

}  // namespace strata::backend::cuda
