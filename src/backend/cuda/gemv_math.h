// The integer arithmetic of the decode matmul on tensor cores (gemv_tc.cu; the math is described
// there): the activations' conversion into limb B vectors and the tile's exact integer dot products.
// Shared with bench_cuda_stream_chain, which runs the same math over another memory layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strata::backend::cuda::gemv_math {

constexpr int kTileBytes = 128;  // bytes of codes per row per k-tile
constexpr int kTargetExp = 21;   // a run's largest |x|·2^e lies in [2^21, 2^22)

template <int kBits>
struct Geometry {
  static constexpr int kTileK = kTileBytes * 8 / kBits;  // activations per tile: 256 or 128
  static constexpr int kRun = kTileK / 4;                // activations per lane's run: 64 or 32
  static constexpr int kSteps = kRun / 8;                // steps of 8 codes per run: 8 or 4
  static constexpr int kTileVecs = kSteps * 8;           // uint4 of B per tile: [step][run][part]
};

// d += A·B over 16 rows × 8 columns × 32 k-slots: A unsigned bytes (the codes), B signed bytes (the
// limbs), exact 32-bit integer sums.
__device__ __forceinline__ void imma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The low bytes of a, b, c, d as one word, a in the lowest byte.
__device__ __forceinline__ uint32_t pack_bytes(int a, int b, int c, int d) {
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

// v (|v| ≤ 2^22) as 65536·top + 256·mid + low, each in [-128, 127].
__device__ __forceinline__ void split_limbs(int v, int& top, int& mid, int& low) {
  low = ((v + 128) & 255) - 128;
  const int r = (v - low) >> 8;  // exact: v - low is a multiple of 256
  mid = ((r + 128) & 255) - 128;
  top = (r - mid) >> 8;
}

// Where a k-tile's B vectors of step j of run c lie in it (two a step: {top, top, low, low} and
// {mid, mid, 0, 0} limb words): by step then run for the one-row kernel, whose lanes read the four
// runs of a step together; by run then step in the multi-row layout (kRows), whose lanes read the
// steps of a run together (gemv_tc_rows.cu).
template <int kBits, bool kRows>
__host__ __device__ constexpr int b_vec(int j, int c) {
  return kRows ? c * Geometry<kBits>::kSteps * 2 + j * 2 : (j * 4 + c) * 2;
}

// Converts task u's 8 activations v (step j of run c of tile t, u = (t·4 + c)·kSteps + j) into its B
// vectors, and lane j = 0 of the run writes the run's {2^-e, Σx of fold 0, of fold 1}. Every lane of
// the warp calls it (the kSteps lanes of a run agree on its scale through shuffles); lanes with
// `active` false hold zeros and write nothing. kRows: the multi-row layout (b_vec).
template <int kBits, int kFolds, bool kRows = false>
__device__ __forceinline__ void store_converted(const float (&v)[8], int64_t u, bool active, uint4* bvec,
                                                float4* info) {
  using G = Geometry<kBits>;
  constexpr int kFoldLanes = G::kSteps / kFolds;
  float amax = 0.0f, sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i])), sum += v[i];
#pragma unroll
  for (int o = 1; o < G::kSteps; o *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
#pragma unroll
  for (int o = 1; o < kFoldLanes; o *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float fold1_sum = __shfl_down_sync(0xffffffffu, sum, kFoldLanes % 32);
  // 2^e from amax's exponent. An infinite run makes 2^-e NaN; a NaN reaches the outputs through
  // the sums (fmaxf drops it from amax).
  const int e_bits = (__float_as_int(amax) >> 23) & 0xFF;
  const int e = max(-126, min(126, kTargetExp + 127 - e_bits));
  const float up = __int_as_float((127 + e) << 23);
  const float down = e_bits == 0xFF ? __int_as_float(0x7FC00000) : __int_as_float((127 - e) << 23);
  int top[8], mid[8], low[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) split_limbs(__float2int_rn(v[i] * up), top[i], mid[i], low[i]);
  // k-slots 4c..4c+3 (b0) and 4c+16..4c+19 (b1): codes 0,2,4,6 and 1,3,5,7 of a 4-bit word; the
  // first and second word at 8 bits.
  auto b0 = [](const int(&l)[8]) {
    return kBits == 4 ? pack_bytes(l[0], l[2], l[4], l[6]) : pack_bytes(l[0], l[1], l[2], l[3]);
  };
  auto b1 = [](const int(&l)[8]) {
    return kBits == 4 ? pack_bytes(l[1], l[3], l[5], l[7]) : pack_bytes(l[4], l[5], l[6], l[7]);
  };
  if (active) {
    const int64_t tile = u / (4 * G::kSteps);
    const int c = static_cast<int>(u / G::kSteps) % 4, j = static_cast<int>(u % G::kSteps);
    uint4* dst = bvec + tile * G::kTileVecs + b_vec<kBits, kRows>(j, c);
    dst[0] = make_uint4(b0(top), b1(top), b0(low), b1(low));
    dst[1] = make_uint4(b0(mid), b1(mid), 0u, 0u);
    if (j == 0) info[tile * 4 + c] = make_float4(down, sum, kFolds == 2 ? fold1_sum : 0.0f, 0.0f);
  }
}

// Steps j0..j1-1 of one k-tile of rows g and g+8: code[h][half] holds 32 bytes of row g + 8h (this
// lane's run), bp the lane's B vectors (step j at bp[8j]). d1 gets (top, mid) and d2 (low, 0) of
// both rows: see row_dot.
template <int kBits>
__device__ __forceinline__ void tile_dot(const uint4 (&code)[2][2], const uint4* bp, int j0, int j1, int (&d1)[4],
                                         int (&d2)[4]) {
#pragma unroll
  for (int j = j0; j < j1; ++j) {
    const uint4 bv = bp[j * 8];
    uint32_t a0, a1, a2, a3;
    if constexpr (kBits == 4) {
      const uint32_t wa = (&code[0][j / 4].x)[j % 4], wb = (&code[1][j / 4].x)[j % 4];
      a0 = wa & 0x0F0F0F0Fu, a1 = wb & 0x0F0F0F0Fu;
      a2 = (wa >> 4) & 0x0F0F0F0Fu, a3 = (wb >> 4) & 0x0F0F0F0Fu;
    } else {
      a0 = (&code[0][j / 2].x)[(2 * j) % 4], a1 = (&code[1][j / 2].x)[(2 * j) % 4];
      a2 = (&code[0][j / 2].x)[(2 * j + 1) % 4], a3 = (&code[1][j / 2].x)[(2 * j + 1) % 4];
    }
    imma(d1, a0, a1, a2, a3, bv.x, bv.y);
    imma(d2, a0, a1, a2, a3, bv.z, bv.w);
  }
}

// v as a float, exactly as static_cast<float>(v), for |v| < 2^22, on the full-rate FP and integer
// pipes instead of the quarter-rate conversion unit: v added to the bits of 1.5·2^23 (whose ulp is 1)
// gives 1.5·2^23 + v, from which 1.5·2^23 is taken exactly. A limb's sum over a run is below 2^17
// at 4 bits (64 codes ≤ 15 times limbs ≤ 128) and 2^20 at 8 (32 codes ≤ 255).
__device__ __forceinline__ float small_int_to_float(int v) {
  return __int_as_float(0x4B400000 + v) - 12582912.0f;
}

// codes · (x·2^e) from its limbs' exact sums: top·65536 + mid·256 + low, rounded once.
__device__ __forceinline__ float limb_value(int top, int mid, int low) {
  return fmaf(small_int_to_float(top), 65536.0f, fmaf(small_int_to_float(mid), 256.0f, small_int_to_float(low)));
}

// Row g + 8h's codes · (x·2^e) over the lane's run, from tile_dot's sums.
__device__ __forceinline__ float row_dot(const int (&d1)[4], const int (&d2)[4], int h) {
  return limb_value(d1[2 * h], d1[2 * h + 1], d2[2 * h]);
}

// A run's contribution folded into its accumulator: acc + v·(scale·2^-e) + bias·Σx, written out
// operation by operation so that every kernel that folds runs (gemv_tc.cu's one-row and multi-row
// kernels) rounds them alike, whatever the compiler would contract.
__device__ __forceinline__ float fold_run(float acc, float v, float scale, float inv_e, float bias, float run_sum) {
  return __fadd_rn(acc, __fmaf_rn(v, __fmul_rn(scale, inv_e), __fmul_rn(bias, run_sum)));
}

}  // namespace strata::backend::cuda::gemv_math
