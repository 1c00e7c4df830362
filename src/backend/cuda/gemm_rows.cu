// The matmul of up to 64 activation rows on MLX 4-bit weights where the GEMM takes them (a decode
// batch of more than 24 sequences when batch invariance is off, Tuning::batch_invariant false; a
// short prompt chunk where the tensor-core decode kernels do not run): the codes dequantized in
// registers straight into bf16 tensor-core fragments, so the weights are read once, as codes,
// instead of being written out as a bf16 copy and read again (the prefill GEMM's way, whose cost at
// these rows is that copy).
//
// Numerics are the prefill GEMM's: each weight s·q + b computed in fp32 and rounded once to bf16,
// x rounded to bf16, products summed in fp32 (mma.sync m16n8k16); only the order of the sums
// differs, and with it a row's last bits depend on the batch's size.
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

template <typename S>
struct Params {
  const uint32_t* codes;  // [N, K / 8]
  const S* scales;        // [N, K / group]
  const S* biases;
  const __nv_bfloat16* x;  // [T, K]
  float* out;              // [T, N] (one split), else the splits' sums [splits, T, N]
  int T, N, K, group_shift, chunks_per_split;
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
__device__ inline Copies<kTiles> copies_of(const Params<S>& p, int row0) {
  Copies<kTiles> c;
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kCode; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i / 2, half = i % 2, row = row0 + r;
    c.code_in[j] = row < p.N;
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

// Copies chunk `c` (k from c · kChunk) of the block's rows and of every token into a stage.
template <int kTiles, typename S>
__device__ inline void load_stage(Stage<kTiles>& st, const Params<S>& p, const Copies<kTiles>& cp, int c) {
  const int k0 = c * kChunk;
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kCode; ++j)
    copy_async16(st.codes + cp.code_dst[j], p.codes + cp.code_src[j] + k0 / 8, cp.code_in[j] ? 16 : 0);
#pragma unroll
  for (int j = 0; j < Copies<kTiles>::kX; ++j)
    copy_async16(st.x + cp.x_dst[j], p.x + cp.x_src[j] + k0, cp.x_in[j] ? 16 : 0);
}

// The scale and bias of this lane's four rows (warp rows g, g + 8, g + 16, g + 24; their first
// group at `first`) for chunk c's k steps: step j's group is (k0 + 16 j) >> group_shift, two a
// chunk for groups of 32, else one; index [row][first or second half of the chunk].
template <typename S>
__device__ inline void load_affine(const Params<S>& p, const int (&first)[4], int c, float (&s)[4][2],
                                   float (&b)[4][2]) {
  const int g0 = (c * kChunk) >> p.group_shift;
  const bool two = p.group_shift == 5;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    s[r][0] = scale_to_float(__ldg(p.scales + first[r] + g0));
    b[r][0] = scale_to_float(__ldg(p.biases + first[r] + g0));
    s[r][1] = two ? scale_to_float(__ldg(p.scales + first[r] + g0 + 1)) : s[r][0];
    b[r][1] = two ? scale_to_float(__ldg(p.biases + first[r] + g0 + 1)) : b[r][0];
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

template <int kTiles, typename S>
__global__ void __launch_bounds__(kThreads, 3) gemm_rows_kernel(const Params<S> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stages = reinterpret_cast<Stage<kTiles>*>(smem);
  wait_for_inputs();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kBlockRows, warp_row0 = row0 + warp * kWarpRows;
  const int chunks = p.K / kChunk;
  const int c0 = blockIdx.y * p.chunks_per_split, c1 = min(chunks, c0 + p.chunks_per_split);

  float acc[2][kTiles][4] = {};
  const Copies<kTiles> cp = copies_of<kTiles>(p, row0);
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (c0 + i < c1) load_stage(stages[i], p, cp, c0 + i);
    copy_async_commit();
  }
  int first[4];  // the first group of each of this lane's rows (past N: the last row's)
#pragma unroll
  for (int r = 0; r < 4; ++r) first[r] = min(warp_row0 + g + 8 * r, p.N - 1) * (p.K >> p.group_shift);
  float s[4][2], b[4][2];
  load_affine(p, first, c0, s, b);
  for (int c = c0; c < c1; ++c) {
    copy_async_wait<kStages - 2>();
    __syncthreads();  // chunk c landed for every thread; the stage chunk c - 1 used is free
    if (c + kStages - 1 < c1) load_stage(stages[(c - c0 + kStages - 1) % kStages], p, cp, c + kStages - 1);
    copy_async_commit();
    const Stage<kTiles>& st = stages[(c - c0) % kStages];
    float ns[4][2], nb[4][2];  // the next chunk's, in flight during this one
    if (c + 1 < c1) load_affine(p, first, c + 1, ns, nb);
#pragma unroll
    for (int j = 0; j < kChunk / 16; ++j) {
      const int h = j / 2;  // the chunk's half: its second group when groups are 32
      uint32_t a[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const uint2 lo = *reinterpret_cast<const uint2*>(
            st.codes + (warp * kWarpRows + 16 * m + g) * kCodePitch + 8 * j);
        const uint2 hi = *reinterpret_cast<const uint2*>(
            st.codes + (warp * kWarpRows + 16 * m + g + 8) * kCodePitch + 8 * j);
        const int sh = 8 * t;
        const float sl = s[2 * m][h], bl = b[2 * m][h], sh8 = s[2 * m + 1][h],
                    bh8 = b[2 * m + 1][h];
        const float sl16 = sl * 0.0625f, sh16 = sh8 * 0.0625f;
        a[m][0] = dequant2(lo.x >> sh, sl, sl16, bl);
        a[m][1] = dequant2(hi.x >> sh, sh8, sh16, bh8);
        a[m][2] = dequant2(lo.y >> sh, sl, sl16, bl);
        a[m][3] = dequant2(hi.y >> sh, sh8, sh16, bh8);
      }
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
    if (c + 1 < c1) {
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) s[r][h] = ns[r][h], b[r][h] = nb[r][h];
    }
  }
  copy_async_wait_all();

  float* dst = p.out + static_cast<int64_t>(blockIdx.y) * p.T * p.N;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = warp_row0 + 16 * m + g + 8 * (e / 2), tok = 8 * n + 2 * t + e % 2;
        if (row < p.N && tok < p.T) dst[static_cast<int64_t>(tok) * p.N + row] = acc[m][n][e];
      }
}

// out[i] = the splits' sums of element i, added in split order.
__global__ void add_splits_kernel(const float* __restrict__ sums, int splits, int64_t n, float* __restrict__ out) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = sums[i];
  for (int s = 1; s < splits; ++s) v += sums[s * n + i];
  out[i] = v;
}

template <int kTiles, typename S>
void launch_rows(const Params<S>& p, int row_blocks, int splits) {
  constexpr size_t kSmem = kStages * sizeof(Stage<kTiles>);
  auto* const kernel = gemm_rows_kernel<kTiles, S>;
  static const bool sized = [&] {
    allow_shared_bytes(kernel, kSmem);
    return true;
  }();
  (void)sized;
  launch(kernel, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits)), kThreads, kSmem, p);
}

template <typename S>
void gemm_rows_one(const __nv_bfloat16* xb, int64_t T, const Weight& w, const Tensor& out) {
  const int64_t N = w.rows(), K = w.cols();
  const int row_blocks = static_cast<int>((N + kBlockRows - 1) / kBlockRows);
  const int chunks = static_cast<int>(K / kChunk);
  // Splits for about one wave of three blocks a multiprocessor, each at least kMinChunksPerSplit
  // chunks long.
  const int want = std::max(1, 3 * sm_count() / row_blocks);
  const int splits = std::max(1, std::min(want, chunks / kMinChunksPerSplit));
  Params<S> p{};
  p.codes = w.w.as<const uint32_t>();
  p.scales = w.scales.as<const S>();
  p.biases = w.biases.as<const S>();
  p.x = xb;
  p.T = static_cast<int>(T);
  p.N = static_cast<int>(N);
  p.K = static_cast<int>(K);
  p.group_shift = std::countr_zero(static_cast<unsigned>(w.group_size));
  p.chunks_per_split = (chunks + splits - 1) / splits;
  const int used = (chunks + p.chunks_per_split - 1) / p.chunks_per_split;  // splits with chunks
  p.out = used == 1 ? out.as<float>()
                    : static_cast<float*>(workspace(WorkspaceSlot::kMatmulSlices,
                                                    static_cast<size_t>(used) * T * N * sizeof(float)));
  switch ((T + 7) / 8) {
    case 4: launch_rows<4, S>(p, row_blocks, used); break;
    case 5: launch_rows<6, S>(p, row_blocks, used); break;
    case 6: launch_rows<6, S>(p, row_blocks, used); break;
    case 7: launch_rows<8, S>(p, row_blocks, used); break;
    case 8: launch_rows<8, S>(p, row_blocks, used); break;
    default: launch_rows<4, S>(p, row_blocks, used); break;  // 17 to 32 tokens (and fewer)
  }
  if (used > 1) {
    const int64_t n = T * N;
    launch(add_splits_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, p.out, used, n, out.as<float>());
  }
}

}  // namespace

bool gemm_rows_supported(const Weight& w, int64_t rows) {
  return w.quantized() && w.bits == 4 && (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) &&
         w.cols() % kChunk == 0 && rows >= 1 && rows <= kGemmRowsMax;
}

void gemm_rows(const __nv_bfloat16* xb, int64_t T, const Weight& w, const Tensor& out) {
  with_scale_type(w, [&](auto s) { gemm_rows_one<decltype(s)>(xb, T, w, out); });
}

}  // namespace strata::backend::cuda
