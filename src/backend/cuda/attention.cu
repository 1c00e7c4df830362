// Causal grouped-query attention over a KV cache on the GPU: a decode kernel that streams keys
// through registers (up to 8 query rows per KV head), a tiled flash-attention kernel for verify
// steps and prefill, both in fp32 on CUDA cores, a tensor-core form of the tiled kernel for prefill
// over a BF16 cache, and a merge of the split-KV partial results they produce when too few blocks
// would run. Lengths come from the positions on the device, so one captured graph serves every step
// below its kv_bound. The caches are F32 or BF16 (kv_cache.h): the CUDA-core kernels take the
// element type as a template parameter and widen BF16 values to fp32 as they read them.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/bf16_pack.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kv_cache.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma.h"
#include "backend/cuda/warp.h"

namespace strata::backend::cuda {

namespace {

// Both kernels work on the rows of one KV head: row i stands for query t = i / group and head
// g = i % group, so every key and value read from memory serves the whole GQA group (and all the
// queries of a verify step). A block takes some rows and one split of the keys those rows see;
// splits > 1 leave partial results (unnormalized output, running max, sum) for the merge kernel.
// Scores are kept in log2 units (scale · log2 e folded into q·k) so that exp2f does the softmax.
constexpr int kTileKeys = 32;  // keys per tile of the tiled kernel; splits are whole tiles
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;

struct Params {
  const float* q;            // [T, Hq, D]
  const void* k;             // [capacity, Hkv, D] of the cache's element type C
  const void* v;             // [capacity, Hkv, D] of C
  const int32_t* positions;  // [T] on the device
  float* out;                // [T, Hq, D]; written directly when splits == 1
  float* part_o;             // [splits, T * Hq, D]: unnormalized outputs of each split
  float2* part_ml;           // [splits, T * Hq]: (running max in log2 units, sum) of each split
  KvRows rows;               // where a token's key and value lie in k and v
  int T, Hq, Hkv, group, capacity, window, splits;
  float scale_log2;  // scale · log2(e): scores live in log2 units so exp2f does the softmax
};

__device__ inline int first_key(int pos, int window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

// kVec consecutive floats, loaded or stored as one access (D % 128 == 0: 16 bytes per lane).
template <int kVec>
struct Vec {
  float x[kVec];
};
template <int kVec>
__device__ inline Vec<kVec> load_vec(const float* p) {
  Vec<kVec> r;
  if constexpr (kVec == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    r.x[0] = v.x, r.x[1] = v.y, r.x[2] = v.z, r.x[3] = v.w;
  } else if constexpr (kVec == 2) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    r.x[0] = v.x, r.x[1] = v.y;
  } else {
    r.x[0] = *p;
  }
  return r;
}
template <int kVec>
__device__ inline void store_vec(float* p, const float* x) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  } else if constexpr (kVec == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(x[0], x[1]);
  } else {
    *p = x[0];
  }
}

// kVec consecutive cache values as one access loads them (16 bytes per lane from an F32 cache, 8
// from a BF16 one), kept packed until widened to fp32, so that a BF16 step's loads can be in flight
// for the price of half the registers.
template <int kVec, typename C>
struct Packed;
template <int kVec>
struct Packed<kVec, float> {
  Vec<kVec> v;
};
template <int kVec>
struct Packed<kVec, __nv_bfloat16> {
  uint32_t w[(kVec + 1) / 2];  // pairs, the lower address in the low half
};
template <int kVec>
__device__ inline Packed<kVec, float> load_packed(const float* p) {
  return {load_vec<kVec>(p)};
}
template <int kVec>
__device__ inline Packed<kVec, __nv_bfloat16> load_packed(const __nv_bfloat16* p) {
  Packed<kVec, __nv_bfloat16> r;
  if constexpr (kVec == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    r.w[0] = u.x, r.w[1] = u.y;
  } else if constexpr (kVec == 2) {
    r.w[0] = *reinterpret_cast<const uint32_t*>(p);
  } else {
    r.w[0] = *reinterpret_cast<const unsigned short*>(p);
  }
  return r;
}
template <int kVec>
__device__ inline Vec<kVec> widen(const Packed<kVec, float>& p) {
  return p.v;
}
template <int kVec>
__device__ inline Vec<kVec> widen(const Packed<kVec, __nv_bfloat16>& p) {
  Vec<kVec> r;
  if constexpr (kVec == 1) {
    r.x[0] = widen_bf16_pair(p.w[0]).x;
  } else {
#pragma unroll
    for (int e = 0; e < kVec; e += 2) {
      const float2 f = widen_bf16_pair(p.w[e / 2]);
      r.x[e] = f.x, r.x[e + 1] = f.y;
    }
  }
  return r;
}

// Lanes of one row group (8 consecutive lanes) reduce together.
__device__ inline float group8_max(float v) {
  for (int offset = 1; offset < 8; offset *= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ inline float group8_sum(float v) {
  for (int offset = 1; offset < 8; offset *= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <int D>
constexpr int vec_width() {
  return D % 128 == 0 ? 4 : D % 64 == 0 ? 2 : 1;
}

// The tiled kernel's shared memory: q rows, a K and a V tile (fp32, rows padded to D + 4), each
// warp's P, and for a BF16 cache a K and a V tile as stored (rows of D), which land there first.
template <int D, int kRowsPerWarp, int kWarps, typename C>
constexpr size_t smem_bytes() {
  return sizeof(float) * ((kRowsPerWarp * kWarps + 2 * kTileKeys) * (D + 4) +
                          kWarps * kTileKeys * kRowsPerWarp) +
         (sizeof(C) == sizeof(float) ? 0 : 2 * sizeof(C) * kTileKeys * D);
}

// Copies the keys [start, start + kKeys) of one KV head of a cache (their rows: `rows`) into a
// tile (rows of kStride elements); keys outside [lo, hi] become zeros (they may be unwritten memory, and a zero value row
// times p = 0 stays 0). Each warp copies whole rows, 32 lanes side by side (several rows at once
// when a row has fewer than 32 chunks of 16 bytes), so the address arithmetic is paid once per
// row, not per chunk.
template <int D, int kWarps, int kStride, typename C, int kKeys = kTileKeys>
__device__ inline void load_tile(C* tile, const C* head, const KvRows& rows, int64_t row_stride,
                                 int start, int lo, int hi) {
  constexpr int kPerChunk = 16 / sizeof(C);
  constexpr int kChunks = D / kPerChunk;
  constexpr int kRowsPerPass = kChunks < 32 && 32 % kChunks == 0 ? 32 / kChunks : 1;
  constexpr int kLaneChunks = (kChunks + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunk = kRowsPerPass > 1 ? lane % kChunks : lane;
  for (int r = warp * kRowsPerPass + (kRowsPerPass > 1 ? lane / kChunks : 0); r < kKeys;
       r += kWarps * kRowsPerPass) {
    const int key = start + r;
    const bool in = key >= lo && key <= hi;
    const C* src = head + (in ? rows.row(key) : 0) * row_stride;
    C* dst = tile + r * kStride;
#pragma unroll
    for (int i = 0; i < kLaneChunks; ++i) {
      const int c = (chunk + 32 * i) * kPerChunk;
      if (chunk + 32 * i < kChunks) copy_async16(dst + c, src + c, in ? 16 : 0);
    }
  }
}

// A BF16 cache's tile as it landed (rows of D) into the fp32 tile (rows of D + 4), 8 values per
// thread and step. Called between the barrier after the tile's copies and the one before its use.
template <int D, int kThreads>
__device__ inline void widen_tile(float* tile, const __nv_bfloat16* raw) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const uint4 u = *reinterpret_cast<const uint4*>(raw + r * D + c);
    const float2 a = widen_bf16_pair(u.x), b = widen_bf16_pair(u.y), e = widen_bf16_pair(u.z),
                 f = widen_bf16_pair(u.w);
    float4* dst = reinterpret_cast<float4*>(tile + r * (D + 4) + c);
    dst[0] = make_float4(a.x, a.y, b.x, b.y);
    dst[1] = make_float4(e.x, e.y, f.x, f.y);
  }
}

// Writes one row's result: normalized into out (one split), or the split's partial state.
// o holds this lane's columns; l == 0 means the split saw no key of the row.
template <int D>
__device__ inline void store_row(const Params& p, int64_t row, int lane, const float* o, float m,
                                 float l) {
  constexpr int kVec = vec_width<D>(), kCols = D / (32 * kVec);
  if (p.splits == 1) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float x[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = o[c * kVec + e] * inv;
      store_vec<kVec>(p.out + row * D + (c * 32 + lane) * kVec, x);
    }
  } else {
    const int64_t split_row = static_cast<int64_t>(blockIdx.z) * p.T * p.Hq + row;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      store_vec<kVec>(p.part_o + split_row * D + (c * 32 + lane) * kVec, o + c * kVec);
    if (lane == 0) p.part_ml[split_row] = make_float2(l > 0.0f ? m : kNegInf, l);
  }
}

// Row i of a KV head's rows (query t = i / group, head g = i % group) as a row of q and out.
__device__ inline int64_t q_row(const Params& p, int kvh, int i) {
  return static_cast<int64_t>(i / p.group) * p.Hq + kvh * p.group + i % p.group;
}

// The keys that rows [first_row, last_row] of a KV head see, [first position's window start, last
// position], and this split's even share of them in whole tiles (empty: lo > hi).
struct KeyRange {
  int lo, hi;
};
__device__ inline KeyRange split_keys(const Params& p, int first_row, int last_row) {
  const int blk_lo = first_key(__ldg(p.positions + first_row / p.group), p.window);
  const int blk_hi = min(__ldg(p.positions + last_row / p.group), p.capacity - 1);
  const int len = blk_hi - blk_lo + 1;
  const int chunk = len > 0 ? (len + p.splits - 1) / p.splits : 0;
  const int span = (chunk + kTileKeys - 1) / kTileKeys * kTileKeys;
  const int lo = blk_lo + static_cast<int>(blockIdx.z) * span;
  return {lo, min(lo + span - 1, blk_hi)};
}

// The keys row `row` of a KV head sees in the split [lo, hi] (causal and window); none (lo > hi)
// for padding rows past rows_per_head.
__device__ inline KeyRange row_keys(const Params& p, int row, int rows_per_head, int lo, int hi) {
  if (row >= rows_per_head) return {INT_MAX, INT_MIN};
  const int pos = __ldg(p.positions + row / p.group);
  return {max(first_key(pos, p.window), lo), min(pos, hi)};
}

// The union over a warp's lanes of the key ranges they hold (lo, hi).
__device__ inline void warp_key_span(int& lo, int& hi) {
  for (int offset = 16; offset > 0; offset /= 2) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
  }
}

// Verify steps and prefill. A block owns kRows rows; its warps own kRowsPerWarp rows each and
// share the K/V tiles of kTileKeys keys that the block streams through shared memory (cp.async; the
// next K tile loads during P·V, the next V tile during Q·K). In a tile, lane (rg, cg) =
// (lane / 8, lane % 8) scores kRowsPerWarp / 4 rows against keys cg + 8j (j < 4), reading 16-byte
// vectors of q and k from shared memory (a row stride of D + 4 floats spreads the 8 keys over all
// banks); then each lane accumulates every row of its warp for its share of the D output columns.
// Each warp keeps its own running max and sum per row, so only the K/V buffers need block barriers.
// A BF16 cache's tiles land as stored in tiles of their own and are widened into the fp32 tiles
// after each copy's barrier (one more barrier a tile), so the compute is the F32 cache's.
// Grid: (row tiles, Hkv, splits).
template <int D, int kRowsPerWarp, int kWarps, typename C>
__global__ void __launch_bounds__(32 * kWarps, 1) tiled_kernel(const Params p) {
  wait_for_inputs();
  static_assert(D % 32 == 0 && D <= 256, "head_dim: a multiple of 32 up to 256");
  static_assert(kRowsPerWarp == 4 || kRowsPerWarp == 8, "4 row groups of 1 or 2 rows");
  constexpr int kThreads = 32 * kWarps;
  constexpr int kRows = kRowsPerWarp * kWarps;
  constexpr int kRowsPerLane = kRowsPerWarp / 4;  // score phase
  constexpr int kStride = D + 4;
  constexpr int kVec = vec_width<D>(), kCols = D / (32 * kVec);  // output phase: columns per lane

  extern __shared__ float4 smem4[];
  float* const qs = reinterpret_cast<float*>(smem4);  // [kRows][kStride]
  float* const ks = qs + kRows * kStride;             // [kTileKeys][kStride]
  float* const vs = ks + kTileKeys * kStride;         // [kTileKeys][kStride]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* const ps =
      vs + kTileKeys * kStride + warp * kTileKeys * kRowsPerWarp;  // this warp's [key][row]
  // Where the copies of a K and a V tile land: the fp32 tiles, or a BF16 cache's own tiles.
  constexpr bool kWiden = !std::is_same_v<C, float>;
  constexpr int kLandStride = kWiden ? D : kStride;
  C* k_land;
  C* v_land;
  if constexpr (kWiden) {
    k_land = reinterpret_cast<C*>(vs + kTileKeys * kStride + kWarps * kTileKeys * kRowsPerWarp);
    v_land = k_land + kTileKeys * D;
  } else {
    k_land = ks;
    v_land = vs;
  }

  // Latest rows first: under a causal mask they have the most keys.
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kRows;
  const int kvh = blockIdx.y;
  const int rows_per_head = p.T * p.group;
  const int last_row = min(row0 + kRows, rows_per_head) - 1;

  const KeyRange range = split_keys(p, row0, last_row);
  const int lo = range.lo, hi = range.hi;

  float o[kRowsPerWarp][kCols * kVec];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < kCols * kVec; ++c) o[r][c] = 0.0f;

  if (lo > hi) {  // nothing for this split (the true length is below kv_bound): an empty state
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int i = row0 + warp * kRowsPerWarp + r;
      if (i < rows_per_head) store_row<D>(p, q_row(p, kvh, i), lane, o[r], kNegInf, 0.0f);
    }
    return;
  }

  // Score-phase rows of this lane and the keys each may see in this split.
  const int rg = lane / 8, cg = lane % 8;
  int row_lo[kRowsPerLane], row_hi[kRowsPerLane];
  int warp_lo = INT_MAX, warp_hi = INT_MIN;
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
    const KeyRange keys =
        row_keys(p, row0 + warp * kRowsPerWarp + rg * kRowsPerLane + i, rows_per_head, lo, hi);
    row_lo[i] = keys.lo, row_hi[i] = keys.hi;
    warp_lo = min(warp_lo, row_lo[i]);
    warp_hi = max(warp_hi, row_hi[i]);
  }
  warp_key_span(warp_lo, warp_hi);

  // Prologue: q rows and the first K tile in one copy group, the first V tile in the next.
  for (int c = threadIdx.x; c < kRows * (D / 4); c += kThreads) {
    const int r = c / (D / 4), col = (c % (D / 4)) * 4;
    const int i = row0 + r;
    const bool real = i < rows_per_head;
    const float* src = real ? p.q + q_row(p, kvh, i) * D + col : p.q;
    copy_async16(qs + r * kStride + col, src, real ? 16 : 0);
  }
  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * D;
  const C* const k_head = static_cast<const C*>(p.k) + static_cast<int64_t>(kvh) * D;
  const C* const v_head = static_cast<const C*>(p.v) + static_cast<int64_t>(kvh) * D;
  load_tile<D, kWarps, kLandStride>(k_land, k_head, p.rows, row_stride, lo, lo, hi);
  copy_async_commit();
  load_tile<D, kWarps, kLandStride>(v_land, v_head, p.rows, row_stride, lo, lo, hi);
  copy_async_commit();

  float m[kRowsPerLane], l[kRowsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) m[i] = kNegInf, l[i] = 0.0f;

  const int tiles = (hi - lo) / kTileKeys + 1;
  for (int tile = 0; tile < tiles; ++tile) {
    const int start = lo + tile * kTileKeys;
    // A warp skips tiles that are masked for all its rows (causal and window); the barriers stay.
    const bool active = start <= warp_hi && start + kTileKeys - 1 >= warp_lo;
    float alpha[kRowsPerLane];

    copy_async_wait<1>();  // K of this tile (and q) landed; V may still be in flight
    __syncthreads();
    if constexpr (kWiden) {
      widen_tile<D, kThreads>(ks, k_land);
      __syncthreads();
    }
    if (active) {
      float acc[kRowsPerLane][4];
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
      const float* qrow = qs + (warp * kRowsPerWarp + rg * kRowsPerLane) * kStride;
      const float* krow = ks + cg * kStride;
#pragma unroll 4
      for (int d = 0; d < D; d += 4) {
        float4 qv[kRowsPerLane], kv[4];
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i)
          qv[i] = *reinterpret_cast<const float4*>(qrow + i * kStride + d);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          kv[j] = *reinterpret_cast<const float4*>(krow + 8 * j * kStride + d);
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            acc[i][j] = fmaf(qv[i].x, kv[j].x, acc[i][j]);
            acc[i][j] = fmaf(qv[i].y, kv[j].y, acc[i][j]);
            acc[i][j] = fmaf(qv[i].z, kv[j].z, acc[i][j]);
            acc[i][j] = fmaf(qv[i].w, kv[j].w, acc[i][j]);
          }
      }
      // Online softmax: masked scores are -inf (selected, never computed with, so garbage keys
      // cannot leak NaN); a row that has seen no key yet keeps m = -inf and l = 0.
      float pr[kRowsPerLane][4];
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i) {
        float s[4], mx = kNegInf;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int key = start + cg + 8 * j;
          s[j] = key >= row_lo[i] && key <= row_hi[i] ? acc[i][j] * p.scale_log2 : kNegInf;
          mx = fmaxf(mx, s[j]);
        }
        const float m_new = fmaxf(m[i], group8_max(mx));
        const float m_use = m_new == kNegInf ? 0.0f : m_new;
        alpha[i] = exp2f(m[i] - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          pr[i][j] = exp2f(s[j] - m_use);
          sum += pr[i][j];
        }
        l[i] = l[i] * alpha[i] + group8_sum(sum);
        m[i] = m_new;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float* dst = ps + (cg + 8 * j) * kRowsPerWarp + rg * kRowsPerLane;
        if constexpr (kRowsPerLane == 2) {
          *reinterpret_cast<float2*>(dst) = make_float2(pr[0][j], pr[1][j]);
        } else {
          *dst = pr[0][j];
        }
      }
    }
    __syncthreads();  // every warp is done with this K tile
    if (tile + 1 < tiles)
      load_tile<D, kWarps, kLandStride>(k_land, k_head, p.rows, row_stride, start + kTileKeys, lo, hi);
    copy_async_commit();
    copy_async_wait<1>();  // V of this tile landed; the next K may still be in flight
    __syncthreads();
    if constexpr (kWiden) {
      widen_tile<D, kThreads>(vs, v_land);
      __syncthreads();
    }
    if (active) {
      // Rescale by each row's alpha (held by the lanes of the row's group), then add P·V.
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float a = __shfl_sync(0xffffffffu, alpha[r % kRowsPerLane], (r / kRowsPerLane) * 8);
#pragma unroll
        for (int c = 0; c < kCols * kVec; ++c) o[r][c] *= a;
      }
#pragma unroll 4
      for (int key = 0; key < kTileKeys; ++key) {
        float pk[kRowsPerWarp];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; r += 4) {
          const float4 v4 = *reinterpret_cast<const float4*>(ps + key * kRowsPerWarp + r);
          pk[r] = v4.x, pk[r + 1] = v4.y, pk[r + 2] = v4.z, pk[r + 3] = v4.w;
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const Vec<kVec> vv = load_vec<kVec>(vs + key * kStride + (c * 32 + lane) * kVec);
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
            for (int e = 0; e < kVec; ++e)
              o[r][c * kVec + e] = fmaf(pk[r], vv.x[e], o[r][c * kVec + e]);
        }
      }
    }
    __syncthreads();  // every warp is done with this V tile and its P
    if (tile + 1 < tiles)
      load_tile<D, kWarps, kLandStride>(v_land, v_head, p.rows, row_stride, start + kTileKeys, lo, hi);
    copy_async_commit();
  }
  copy_async_wait<0>();

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float mr = __shfl_sync(0xffffffffu, m[r % kRowsPerLane], (r / kRowsPerLane) * 8);
    const float lr = __shfl_sync(0xffffffffu, l[r % kRowsPerLane], (r / kRowsPerLane) * 8);
    const int i = row0 + warp * kRowsPerWarp + r;
    if (i < rows_per_head) store_row<D>(p, q_row(p, kvh, i), lane, o[r], mr, lr);
  }
}

// Prefill over a BF16 cache on tensor cores (mma.sync m16n8k16, fp32 accumulation). Keys and values
// are bf16 already, so only q and p need care: each is split into two bf16 limbs, hi = bf16(x) and
// lo = bf16(x - hi), and multiplied limb by limb into the same fp32 accumulators. The two limbs
// carry 16 significant bits (|x - hi - lo| is at most 2^-16 |x|), so the op tests hold this kernel
// to the fp32 kernels' tolerance, at twice the mma that rounding q and p to bf16 would take.
// A block owns kMmaRows = 64 rows of a KV head (16 a warp, as the A fragment's rows) and streams
// tiles of kKeys keys through shared memory as the tiled kernel does (the next K tile loads during
// P·V, the next V tile during Q·K). Lane (g, c) = (lane / 4, lane % 4) holds the scores and output
// columns 2c, 2c + 1 of each 8-column n-tile for rows g and g + 8 of its warp, so a row's max and
// sum are reduced over the four lanes of a quad. Grid: (row tiles, Hkv, splits).
constexpr int kMmaWarps = 4;
constexpr int kMmaRows = 16 * kMmaWarps;

template <int D>
constexpr int mma_keys() {
  return D <= 128 ? 64 : 32;  // keeps D = 256 at two blocks an SM (registers and shared memory)
}
template <int D>
constexpr int mma_pitch() {
  return D + 8;  // bf16 elements a row: 16 bytes of padding spread ldmatrix's 8 rows over the banks
}
template <int D>
constexpr size_t mma_smem_bytes() {
  return sizeof(__nv_bfloat16) * (2 * kMmaRows + 2 * mma_keys<D>()) * mma_pitch<D>();
}

// x as two bf16 limbs (hi = x rounded, lo = the remainder rounded), packed in pairs.
struct Limbs {
  uint32_t hi, lo;
};
__device__ inline Limbs split_pair(float a, float b) {
  const uint32_t hi = pack_bf16x2(a, b);
  const float2 h = widen_bf16_pair(hi);
  return {hi, pack_bf16x2(a - h.x, b - h.y)};
}

template <int D>
__global__ void __launch_bounds__(32 * kMmaWarps) mma_kernel(const Params p) {
  wait_for_inputs();
  static_assert(D % 16 == 0 && D <= 256, "head_dim: a multiple of 16 up to 256");
  constexpr int kKeys = mma_keys<D>(), kPitch = mma_pitch<D>();
  constexpr int kThreads = 32 * kMmaWarps, kNKeys = kKeys / 8, kND = D / 8;

  extern __shared__ float4 smem4[];
  __nv_bfloat16* const q_hi = reinterpret_cast<__nv_bfloat16*>(smem4);  // [kMmaRows][kPitch]
  __nv_bfloat16* const q_lo = q_hi + kMmaRows * kPitch;                 // [kMmaRows][kPitch]
  __nv_bfloat16* const ks = q_lo + kMmaRows * kPitch;                   // [kKeys][kPitch]
  __nv_bfloat16* const vs = ks + kKeys * kPitch;                        // [kKeys][kPitch]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;

  const int row0 = (gridDim.x - 1 - blockIdx.x) * kMmaRows;  // latest rows first
  const int kvh = blockIdx.y;
  const int rows_per_head = p.T * p.group;
  const int last_row = min(row0 + kMmaRows, rows_per_head) - 1;
  const KeyRange range = split_keys(p, row0, last_row);
  const int lo = range.lo, hi = range.hi;

  // This lane's rows (g and g + 8 of its warp) and the keys each may see in this split.
  int row[2], row_lo[2], row_hi[2];
  int warp_lo = INT_MAX, warp_hi = INT_MIN;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row[h] = row0 + warp * 16 + g + 8 * h;
    const KeyRange keys = row_keys(p, row[h], rows_per_head, lo, hi);
    row_lo[h] = keys.lo, row_hi[h] = keys.hi;
    warp_lo = min(warp_lo, row_lo[h]);
    warp_hi = max(warp_hi, row_hi[h]);
  }
  warp_key_span(warp_lo, warp_hi);

  float o[kND][4];
#pragma unroll
  for (int n = 0; n < kND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // l: this lane's share of the row sum

  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * D;
  const auto* const k_head = static_cast<const __nv_bfloat16*>(p.k) + static_cast<int64_t>(kvh) * D;
  const auto* const v_head = static_cast<const __nv_bfloat16*>(p.v) + static_cast<int64_t>(kvh) * D;
  if (lo <= hi) {
    load_tile<D, kMmaWarps, kPitch, __nv_bfloat16, kKeys>(ks, k_head, p.rows, row_stride, lo, lo, hi);
    copy_async_commit();
    load_tile<D, kMmaWarps, kPitch, __nv_bfloat16, kKeys>(vs, v_head, p.rows, row_stride, lo, lo, hi);
    copy_async_commit();
    // q's rows as limbs, four values a thread and step, while the first tiles load.
    for (int i = threadIdx.x; i < kMmaRows * (D / 4); i += kThreads) {
      const int r = i / (D / 4), col = (i % (D / 4)) * 4;
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (row0 + r < rows_per_head)
        x = *reinterpret_cast<const float4*>(p.q + q_row(p, kvh, row0 + r) * D + col);
      const Limbs a = split_pair(x.x, x.y), b = split_pair(x.z, x.w);
      *reinterpret_cast<uint2*>(q_hi + r * kPitch + col) = make_uint2(a.hi, b.hi);
      *reinterpret_cast<uint2*>(q_lo + r * kPitch + col) = make_uint2(a.lo, b.lo);
    }
  }

  const int tiles = lo <= hi ? (hi - lo) / kKeys + 1 : 0;
  for (int tile = 0; tile < tiles; ++tile) {
    const int start = lo + tile * kKeys;
    // A warp skips tiles that are masked for all its rows (causal and window); the barriers stay.
    const bool active = start <= warp_hi && start + kKeys - 1 >= warp_lo;
    float s[kNKeys][4];

    copy_async_wait<1>();  // K of this tile landed; V may still be in flight
    __syncthreads();       // (and, the first time, q's limbs are stored)
    if (active) {
#pragma unroll
      for (int j = 0; j < kNKeys; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
      const int q_at = (warp * 16 + lane % 16) * kPitch + (lane / 16) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a_hi[4], a_lo[4];
        ldmatrix_x4(a_hi, q_hi + q_at + kk * 16);
        ldmatrix_x4(a_lo, q_lo + q_at + kk * 16);
#pragma unroll
        for (int j = 0; j < kNKeys / 2; ++j) {
          uint32_t b[4];  // keys 16j..16j+7 (d low, high), then 16j+8..16j+15
          ldmatrix_x4(b, ks + (j * 16 + (lane / 16) * 8 + lane % 8) * kPitch + kk * 16 +
                             ((lane / 8) % 2) * 8);
          mma_bf16(s[2 * j], a_hi, b[0], b[1]);
          mma_bf16(s[2 * j], a_lo, b[0], b[1]);
          mma_bf16(s[2 * j + 1], a_hi, b[2], b[3]);
          mma_bf16(s[2 * j + 1], a_lo, b[2], b[3]);
        }
      }
      // Online softmax: masked scores are -inf (selected, never computed with); a row that has
      // seen no key yet keeps m = -inf and l = 0.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = kNegInf;
#pragma unroll
        for (int j = 0; j < kNKeys; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = start + j * 8 + 2 * c + e;
            float& x = s[j][2 * h + e];
            x = key >= row_lo[h] && key <= row_hi[h] ? x * p.scale_log2 : kNegInf;
            mx = fmaxf(mx, x);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx);
        const float m_use = m_new == kNegInf ? 0.0f : m_new;
        const float alpha = exp2f(m[h] - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kNKeys; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * h + e];
            x = exp2f(x - m_use);
            sum += x;
          }
        l[h] = l[h] * alpha + sum;
        m[h] = m_new;
#pragma unroll
        for (int n = 0; n < kND; ++n) o[n][2 * h] *= alpha, o[n][2 * h + 1] *= alpha;
      }
    }
    __syncthreads();  // every warp is done with this K tile
    if (tile + 1 < tiles)
      load_tile<D, kMmaWarps, kPitch, __nv_bfloat16, kKeys>(ks, k_head, p.rows, row_stride, start + kKeys,
                                                            lo, hi);
    copy_async_commit();
    copy_async_wait<1>();  // V of this tile landed; the next K may still be in flight
    __syncthreads();
    if (active) {
#pragma unroll
      for (int t = 0; t < kKeys / 16; ++t) {
        // P's A fragment for keys 16t..16t+15, straight from the score accumulators.
        uint32_t a_hi[4], a_lo[4];
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const float* x = s[2 * t + f / 2] + 2 * (f % 2);
          const Limbs pl = split_pair(x[0], x[1]);
          a_hi[f] = pl.hi, a_lo[f] = pl.lo;
        }
#pragma unroll
        for (int n = 0; n < kND / 2; ++n) {
          uint32_t b[4];  // columns 16n..16n+7 (keys low, high), then 16n+8..16n+15
          ldmatrix_x4_trans(b, vs + (t * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kPitch + n * 16 +
                                   (lane / 16) * 8);
          mma_bf16(o[2 * n], a_hi, b[0], b[1]);
          mma_bf16(o[2 * n], a_lo, b[0], b[1]);
          mma_bf16(o[2 * n + 1], a_hi, b[2], b[3]);
          mma_bf16(o[2 * n + 1], a_lo, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this V tile
    if (tile + 1 < tiles)
      load_tile<D, kMmaWarps, kPitch, __nv_bfloat16, kKeys>(vs, v_head, p.rows, row_stride, start + kKeys,
                                                            lo, hi);
    copy_async_commit();
  }
  copy_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (row[h] >= rows_per_head) continue;
    const int64_t out_row = q_row(p, kvh, row[h]);
    if (p.splits == 1) {
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int n = 0; n < kND; ++n)
        *reinterpret_cast<float2*>(p.out + out_row * D + n * 8 + 2 * c) =
            make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    } else {
      const int64_t split_row = static_cast<int64_t>(blockIdx.z) * p.T * p.Hq + out_row;
#pragma unroll
      for (int n = 0; n < kND; ++n)
        *reinterpret_cast<float2*>(p.part_o + split_row * D + n * 8 + 2 * c) =
            make_float2(o[n][2 * h], o[n][2 * h + 1]);
      if (c == 0) p.part_ml[split_row] = make_float2(sum > 0.0f ? m[h] : kNegInf, sum);
    }
  }
}

// Asks L2 for the K and V rows [range.lo, range.hi] of KV head kvh, a 128-byte line per thread
// and step (prefetch.global.L2: no registers, nothing waits for it).
template <int D, typename C>
__device__ inline void prefetch_rows(const Params& p, int kvh, const KeyRange& range) {
  constexpr int kLines = (D * static_cast<int>(sizeof(C)) + 127) / 128;  // lines a row
  const int keys = range.hi - range.lo + 1;
  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * D;
  for (int i = threadIdx.x; i < 2 * keys * kLines; i += blockDim.x) {
    const int key = range.lo + i / (2 * kLines), line = i % kLines;
    const void* base = i / kLines % 2 == 0 ? p.k : p.v;
    const char* row = static_cast<const char*>(base) +
                      (p.rows.row(key) * row_stride + static_cast<int64_t>(kvh) * D) * sizeof(C);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(row + line * 128));
  }
}

// Decode: at most 8 rows per KV head (a decode step with a group of up to 8, or a short verify
// step of a small group). Keys and values stream from memory straight into registers, 16 bytes per
// lane, with no shared-memory tiles, so that many warps fit on an SM. Each lane holds D / 32
// columns of every row's q, of kKeys keys and of every row's output; the kRows · kKeys = 16 partial
// dot products of a step are summed across the warp by a reduce-scatter (16 shuffles), after which
// each lane pair owns one (row, key) score. The warps of a block take interleaved steps of one
// split and merge their states in shared memory at the end.
constexpr int kDecodeWarps = 4;

template <int D, int kRows, typename C>
__device__ __forceinline__ void decode_block(const Params& p) {
  static_assert(kRows == 4 || kRows == 8, "16 scores per step");
  constexpr int kKeys = 16 / kRows;
  constexpr int kVec = vec_width<D>(), kCols = D / (32 * kVec), kE = kCols * kVec;
  __shared__ __align__(16) float share[kDecodeWarps][16 + kRows];  // a step's p, then alpha per row
  __shared__ __align__(16) float merge_o[kDecodeWarps][kRows][D];
  __shared__ float merge_m[kDecodeWarps][kRows], merge_l[kDecodeWarps][kRows];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = blockIdx.y;
  const int rows = p.T * p.group;  // at most kRows
  // The positions were staged before the step's first kernel, so the split's keys are known before
  // the wait; their rows are asked into L2 meanwhile (rows of earlier steps; the row the kernel
  // before writes is only fetched, and L2 keeps it coherent).
  const KeyRange range = split_keys(p, 0, rows - 1);
  prefetch_rows<D, C>(p, kvh, range);
  wait_for_inputs();

  float o[kRows][kE];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int e = 0; e < kE; ++e) o[r][e] = 0.0f;
  if (range.lo > range.hi) {  // nothing for this split (the true length is below kv_bound)
    for (int r = warp; r < rows; r += kDecodeWarps)
      store_row<D>(p, q_row(p, kvh, r), lane, o[0], kNegInf, 0.0f);
    return;
  }

  // q of every row at this lane's columns, in log2 units (padding rows: zeros, and masked below).
  float q[kRows][kE];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float* src = p.q + (r < rows ? q_row(p, kvh, r) : 0) * D;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const Vec<kVec> v = load_vec<kVec>(src + (c * 32 + lane) * kVec);
#pragma unroll
      for (int e = 0; e < kVec; ++e) q[r][c * kVec + e] = r < rows ? v.x[e] * p.scale_log2 : 0.0f;
    }
  }

  // The score this lane pair owns after the reduction, and the keys its row sees in this split.
  const int owned = (lane >> 1) & 15, my_row = owned / kKeys, my_key = owned % kKeys;
  const KeyRange my_keys = row_keys(p, my_row, rows, range.lo, range.hi);
  const int row_lo = my_keys.lo, row_hi = my_keys.hi;
  float m = kNegInf, l = 0.0f;  // of my_row

  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * D;
  const C* const k_head = static_cast<const C*>(p.k) + static_cast<int64_t>(kvh) * D;
  const C* const v_head = static_cast<const C*>(p.v) + static_cast<int64_t>(kvh) * D;
  // A step's keys and values as loaded (keys past the split's end read row 0; they are masked).
  // From a BF16 cache the next step's loads go out before this step's math, so that a warp has as
  // many bytes in flight as from an F32 cache (measured on an H100 at 16K: +1-3% decode tok/s;
  // the same for an F32 cache cost the 9B 3%, its registers doubling).
  constexpr bool kAhead = !std::is_same_v<C, float>;
  using Raw = Packed<kVec, C>;
  Raw raw_k[kKeys][kCols], raw_v[kKeys][kCols];
  auto fetch = [&](int base, Raw(&rk)[kKeys][kCols], Raw(&rv)[kKeys][kCols]) {
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const int64_t at = p.rows.row(base + k <= range.hi ? base + k : 0) * row_stride;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        rk[k][c] = load_packed<kVec>(k_head + at + (c * 32 + lane) * kVec);
        rv[k][c] = load_packed<kVec>(v_head + at + (c * 32 + lane) * kVec);
      }
    }
  };
  constexpr int kStep = kDecodeWarps * kKeys;
  if (kAhead && range.lo + warp * kKeys <= range.hi) fetch(range.lo + warp * kKeys, raw_k, raw_v);
  for (int base = range.lo + warp * kKeys; base <= range.hi; base += kStep) {
    if (!kAhead) fetch(base, raw_k, raw_v);
    // This step's keys and values in fp32; keys past the split's end are zeros (their memory may
    // be unwritten).
    float kr[kKeys][kE], vr[kKeys][kE];
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const bool in = base + k <= range.hi;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const Vec<kVec> kv = widen(raw_k[k][c]), vv = widen(raw_v[k][c]);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          kr[k][c * kVec + e] = in ? kv.x[e] : 0.0f;
          vr[k][c * kVec + e] = in ? vv.x[e] : 0.0f;
        }
      }
    }
    if (kAhead && base + kStep <= range.hi) fetch(base + kStep, raw_k, raw_v);
    // This lane's parts of the step's 16 scores (row-major), then a reduce-scatter over lane bits
    // 4..1; the last shuffle sums the lane pair.
    float d[16];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int k = 0; k < kKeys; ++k) {
        float acc = 0.0f;
#pragma unroll
        for (int e = 0; e < kE; ++e) acc = fmaf(q[r][e], kr[k][e], acc);
        d[r * kKeys + k] = acc;
      }
    warp_reduce_scatter(d, lane);
    d[0] += __shfl_xor_sync(0xffffffffu, d[0], 1);

    // Online softmax of my_row over this step's keys (the lanes of one row differ in bits 1..).
    const int key = base + my_key;
    const float s = key >= row_lo && key <= row_hi ? d[0] : kNegInf;
    float step_max = s;
#pragma unroll
    for (int b = 2; b < 2 * kKeys; b *= 2)
      step_max = fmaxf(step_max, __shfl_xor_sync(0xffffffffu, step_max, b));
    const float m_new = fmaxf(m, step_max);
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = exp2f(m - m_use), pr = exp2f(s - m_use);
    float step_sum = pr;
#pragma unroll
    for (int b = 2; b < 2 * kKeys; b *= 2) step_sum += __shfl_xor_sync(0xffffffffu, step_sum, b);
    l = l * alpha + step_sum;
    m = m_new;

    // Every lane needs all rows' p and alpha for its columns of the output.
    if ((lane & 1) == 0) {
      share[warp][owned] = pr;
      if (my_key == 0) share[warp][16 + my_row] = alpha;
    }
    __syncwarp();
    float ps[16 + kRows];
#pragma unroll
    for (int i = 0; i < 16 + kRows; i += 4) {
      const float4 x = *reinterpret_cast<const float4*>(&share[warp][i]);
      ps[i] = x.x, ps[i + 1] = x.y, ps[i + 2] = x.z, ps[i + 3] = x.w;
    }
    __syncwarp();  // read before the next step overwrites
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        float acc = o[r][e] * ps[16 + r];
#pragma unroll
        for (int k = 0; k < kKeys; ++k) acc = fmaf(ps[r * kKeys + k], vr[k][e], acc);
        o[r][e] = acc;
      }
  }

  // Merge the warps' states of each row (log-sum-exp), one row per warp at a time.
  if ((lane & 1) == 0 && my_key == 0) merge_m[warp][my_row] = m, merge_l[warp][my_row] = l;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      store_vec<kVec>(&merge_o[warp][r][(c * 32 + lane) * kVec], o[r] + c * kVec);
  __syncthreads();
  for (int r = warp; r < rows; r += kDecodeWarps) {
    float mx = kNegInf;
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, merge_m[w][r]);
    const float m_use = mx == kNegInf ? 0.0f : mx;
    float sum = 0.0f, acc[kE] = {};
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float wm = merge_m[w][r];
      const float weight = wm == kNegInf ? 0.0f : exp2f(wm - m_use);
      sum += weight * merge_l[w][r];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const Vec<kVec> x = load_vec<kVec>(&merge_o[w][r][(c * 32 + lane) * kVec]);
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[c * kVec + e] = fmaf(weight, x.x[e], acc[c * kVec + e]);
      }
    }
    store_row<D>(p, q_row(p, kvh, r), lane, acc, mx, sum);
  }
}

template <int D, int kRows, typename C>
__global__ void __launch_bounds__(32 * kDecodeWarps) decode_kernel(const Params p) {
  decode_block<D, kRows, C>(p);
}

// A decode step of several sequences sharing one pool (attention_rows), one launch: block
// (b, kvh, split) does for sequence b exactly what decode_kernel's block (0, kvh, split) does for
// it alone, with its q and out rows, position, block table, split count and partials; blocks past
// a sequence's splits have nothing to do.
constexpr int kRowsMax = 64;  // sequences of one launch
struct RowSeqs {
  const int32_t* table[kRowsMax];
  int splits[kRowsMax];
  int part_row0[kRowsMax];  // its first partial row: the earlier sequences' splits · Hq
};

template <int D>
__device__ inline Params row_params(const Params& p, const RowSeqs& s, int b) {
  Params q = p;
  const int64_t row0 = static_cast<int64_t>(b) * p.Hq;  // T = 1: a sequence's rows are its heads
  q.q += row0 * D;
  q.out += row0 * D;
  q.positions += b;
  q.rows.table = s.table[b];
  q.splits = s.splits[b];
  q.part_o += static_cast<int64_t>(s.part_row0[b]) * D;
  q.part_ml += s.part_row0[b];
  return q;
}

template <int D, int kRows, typename C>
__global__ void __launch_bounds__(32 * kDecodeWarps) decode_rows_kernel(const Params p, const RowSeqs s) {
  const int b = blockIdx.x;
  if (static_cast<int>(blockIdx.z) >= s.splits[b]) return;
  decode_block<D, kRows, C>(row_params<D>(p, s, b));
}

// Merges the splits of one output row with the log-sum-exp rule. A block takes one row and one slab
// of 32 · kVec columns; its warps take every kMergeWarps-th split, so that the loads of many splits
// (over a hundred in long decodes) are in flight at once.
constexpr int kMergeWarps = 16;

template <int D>
__device__ __forceinline__ void merge_row(const float* __restrict__ part_o, const float2* __restrict__ part_ml,
                                          int splits, int rows, int row, float* __restrict__ out) {
  wait_for_inputs();
  constexpr int kVec = vec_width<D>(), kSlab = 32 * kVec;
  __shared__ float red[kMergeWarps];
  __shared__ __align__(16) float partial[kMergeWarps][kSlab];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = blockIdx.y * kSlab + lane * kVec;

  float m = kNegInf;
  for (int s = threadIdx.x; s < splits; s += blockDim.x)
    m = fmaxf(m, part_ml[static_cast<int64_t>(s) * rows + row].x);
  for (int offset = 16; offset > 0; offset /= 2)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < kMergeWarps; ++w) m = fmaxf(m, red[w]);
  const float m_use = m == kNegInf ? 0.0f : m;

  // Every split's partial output is finite (zeros where it saw no key), so a weight of 0 is safe.
  float o[kVec] = {};
  float l = 0.0f;
#pragma unroll 8
  for (int s = warp; s < splits; s += kMergeWarps) {
    const int64_t split_row = static_cast<int64_t>(s) * rows + row;
    const float2 ml = part_ml[split_row];
    const float w = ml.x == kNegInf ? 0.0f : exp2f(ml.x - m_use);
    l += w * ml.y;
    const Vec<kVec> x = load_vec<kVec>(part_o + split_row * D + col);
#pragma unroll
    for (int e = 0; e < kVec; ++e) o[e] = fmaf(w, x.x[e], o[e]);
  }
  store_vec<kVec>(&partial[warp][lane * kVec], o);
  __syncthreads();  // every thread has read red[] for m before it is reused for l
  if (lane == 0) red[warp] = l;
  __syncthreads();
  if (warp == 0) {
    float total = 0.0f, sum[kVec] = {};
    for (int w = 0; w < kMergeWarps; ++w) {
      total += red[w];
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum[e] += partial[w][lane * kVec + e];
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
    for (int e = 0; e < kVec; ++e) sum[e] *= inv;
    store_vec<kVec>(out + static_cast<int64_t>(row) * D + col, sum);
  }
}

template <int D>
__global__ void __launch_bounds__(32 * kMergeWarps)
    merge_kernel(const float* __restrict__ part_o, const float2* __restrict__ part_ml, int splits,
                 int rows, float* __restrict__ out) {
  merge_row<D>(part_o, part_ml, splits, rows, blockIdx.x, out);
}

// The merges of attention_rows' sequences: block row b · Hq + h merges head h of sequence b, as
// merge_kernel would for it alone (a sequence of one split wrote its output directly).
template <int D>
__global__ void __launch_bounds__(32 * kMergeWarps)
    merge_rows_kernel(const float* __restrict__ part_o, const float2* __restrict__ part_ml, int Hq,
                      const RowSeqs s, float* __restrict__ out) {
  const int b = blockIdx.x / Hq, h = blockIdx.x % Hq;
  if (s.splits[b] == 1) return;
  const int64_t row0 = s.part_row0[b];
  merge_row<D>(part_o + row0 * D, part_ml + row0, s.splits[b], Hq, h,
               out + static_cast<int64_t>(b) * Hq * D);
}

constexpr int kMaxSplits = 1024;

// The splits of the keys below kv_bound for a launch of `blocks` blocks a split: enough for every
// SM to hold blocks_per_sm of them, at most one per tile of kv_bound.
int64_t split_count(int blocks_per_sm, int64_t blocks, int64_t kv_bound) {
  const int64_t target = static_cast<int64_t>(blocks_per_sm) * sm_count();
  int64_t splits = (target + blocks - 1) / blocks;
  const int64_t max_splits = (kv_bound + kTileKeys - 1) / kTileKeys;
  if (splits > max_splits) splits = max_splits;
  if (splits > kMaxSplits) splits = kMaxSplits;
  return splits < 1 ? 1 : splits;
}

// Launches kernel (rows_per_block rows of a KV head per block) over enough splits of the keys for
// every SM to hold as many blocks as fit, at most one per tile of kv_bound, then merges the splits.
// (On an H200, one full wave of short splits beat fewer, longer ones even with the merge.)
// blocks_per_sm comes from the occupancy calculator, once per kernel, on the eager call that
// precedes any capture.
template <int D>
void launch_splits(void (*kernel)(Params), int threads, size_t smem, int blocks_per_sm,
                   int rows_per_block, Params p, int64_t kv_bound) {
  const int64_t row_tiles =
      (static_cast<int64_t>(p.T) * p.group + rows_per_block - 1) / rows_per_block;
  const int64_t splits = split_count(blocks_per_sm, row_tiles * p.Hkv, kv_bound);
  p.splits = static_cast<int>(splits);

  const int64_t rows = static_cast<int64_t>(p.T) * p.Hq;
  if (splits > 1) {
    // (m, l) pairs first, then the outputs at a 256-byte boundary.
    const size_t ml_bytes = (static_cast<size_t>(splits * rows) * sizeof(float2) + 255) / 256 * 256;
    const size_t o_bytes = static_cast<size_t>(splits * rows * D) * sizeof(float);
    char* ws = static_cast<char*>(workspace(WorkspaceSlot::kAttention, ml_bytes + o_bytes));
    p.part_ml = reinterpret_cast<float2*>(ws);
    p.part_o = reinterpret_cast<float*>(ws + ml_bytes);
  }
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.Hkv),
                  static_cast<unsigned>(splits));
  launch(kernel, grid, threads, smem, p);
  if (splits > 1) {
    const dim3 merge_grid(static_cast<unsigned>(rows), D / (32 * vec_width<D>()));
    launch(merge_kernel<D>, merge_grid, 32 * kMergeWarps, 0, p.part_o, p.part_ml, p.splits,
           static_cast<int>(rows), p.out);
  }
}

// Blocks of kernel an SM holds at once at this launch shape (at least 1), from the occupancy
// calculator; each caller asks once per kernel, on the eager call that precedes any capture.
int resident_blocks(void (*kernel)(Params), int threads, size_t smem) {
  if (smem > 0) allow_shared_bytes(kernel, smem);
  int n = 0;
  STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return n > 0 ? n : 1;
}

// decode_kernel's blocks an SM holds, which sets its split counts (asked once).
template <int D, int kRows, typename C>
int decode_blocks_per_sm() {
  static const int blocks_per_sm = resident_blocks(decode_kernel<D, kRows, C>, 32 * kDecodeWarps, 0);
  return blocks_per_sm;
}

template <int D, int kRows, typename C>
void run_decode(const Params& p, int64_t kv_bound) {
  launch_splits<D>(decode_kernel<D, kRows, C>, 32 * kDecodeWarps, 0, decode_blocks_per_sm<D, kRows, C>(), kRows, p,
                   kv_bound);
}

// attention_rows' launch: every sequence gets the splits its own decode_kernel launch would (so its
// partials, and the merge of them, are the ones it has alone); the partials of the sequences with
// more than one split lie one after another in the workspace.
template <int D, int kRows, typename C>
void run_decode_rows(Params p, std::span<const KvBlocks> row_blocks, std::span<const int64_t> kv_bounds) {
  const int B = static_cast<int>(row_blocks.size());
  RowSeqs s{};
  int64_t part_rows = 0, max_splits = 1;
  for (int b = 0; b < B; ++b) {
    const int64_t splits = split_count(decode_blocks_per_sm<D, kRows, C>(), p.Hkv, kv_bounds[b]);
    s.table[b] = row_blocks[b].table.template as<const int32_t>();
    s.splits[b] = static_cast<int>(splits);
    s.part_row0[b] = static_cast<int>(part_rows);
    if (splits > 1) part_rows += splits * p.Hq;
    max_splits = std::max(max_splits, splits);
  }
  if (part_rows > 0) {
    const size_t ml_bytes = (static_cast<size_t>(part_rows) * sizeof(float2) + 255) / 256 * 256;
    const size_t o_bytes = static_cast<size_t>(part_rows * D) * sizeof(float);
    char* ws = static_cast<char*>(workspace(WorkspaceSlot::kAttention, ml_bytes + o_bytes));
    p.part_ml = reinterpret_cast<float2*>(ws);
    p.part_o = reinterpret_cast<float*>(ws + ml_bytes);
  }
  const dim3 grid(static_cast<unsigned>(B), static_cast<unsigned>(p.Hkv), static_cast<unsigned>(max_splits));
  launch(decode_rows_kernel<D, kRows, C>, grid, 32 * kDecodeWarps, 0, p, s);
  if (part_rows > 0) {
    const dim3 merge_grid(static_cast<unsigned>(B * p.Hq), D / (32 * vec_width<D>()));
    launch(merge_rows_kernel<D>, merge_grid, 32 * kMergeWarps, 0, p.part_o, p.part_ml, p.Hq, s, p.out);
  }
}

// run_decode_rows for head_dim d, the first of kDims it equals; false where none does or the
// group is not the decode kernel's.
template <typename C, int kDim, int... kDims>
bool run_rows_head_dim(int64_t d, const Params& p, std::span<const KvBlocks> row_blocks,
                       std::span<const int64_t> kv_bounds) {
  if (d == kDim) {
    if (p.group <= 4) {
      run_decode_rows<kDim, 4, C>(p, row_blocks, kv_bounds);
    } else if (p.group <= 8) {
      run_decode_rows<kDim, 8, C>(p, row_blocks, kv_bounds);
    } else {
      return false;
    }
    return true;
  }
  if constexpr (sizeof...(kDims) == 0) {
    return false;
  } else {
    return run_rows_head_dim<C, kDims...>(d, p, row_blocks, kv_bounds);
  }
}

template <int D>
void run_mma(const Params& p, int64_t kv_bound) {
  constexpr size_t kSmem = mma_smem_bytes<D>();
  auto* const kernel = mma_kernel<D>;
  static const int blocks_per_sm = resident_blocks(kernel, 32 * kMmaWarps, kSmem);
  launch_splits<D>(kernel, 32 * kMmaWarps, kSmem, blocks_per_sm, kMmaRows, p, kv_bound);
}

template <int D, int kRowsPerWarp, int kWarps, typename C>
void run_tiled(const Params& p, int64_t kv_bound) {
  constexpr size_t kSmem = smem_bytes<D, kRowsPerWarp, kWarps, C>();
  auto* const kernel = tiled_kernel<D, kRowsPerWarp, kWarps, C>;
  static const int blocks_per_sm = resident_blocks(kernel, 32 * kWarps, kSmem);
  launch_splits<D>(kernel, 32 * kWarps, kSmem, blocks_per_sm, kRowsPerWarp * kWarps, p, kv_bound);
}

// By the rows per KV head (T · group): decode steps stream keys through registers; verify steps use
// tiles of 16 or 32 rows; prefill uses tiles of 64 rows, on tensor cores over a BF16 cache.
template <int D, typename C>
void run_rows(const Params& p, int64_t kv_bound) {
  const int64_t rows = static_cast<int64_t>(p.T) * p.group;
  if (rows <= 4) {
    run_decode<D, 4, C>(p, kv_bound);
  } else if (rows <= 8) {
    run_decode<D, 8, C>(p, kv_bound);
  } else if (rows <= 16) {
    run_tiled<D, 8, 2, C>(p, kv_bound);
  } else if (rows <= 32) {
    run_tiled<D, 8, 4, C>(p, kv_bound);
  } else if constexpr (std::is_same_v<C, __nv_bfloat16>) {
    run_mma<D>(p, kv_bound);
  } else {
    run_tiled<D, 8, 8, C>(p, kv_bound);
  }
}

// run_rows for head_dim d, the first of kDims it equals (the last when none does: the caller has
// checked that d is one of them).
template <typename C, int kDim, int... kDims>
void run_head_dim(int64_t d, const Params& p, int64_t kv_bound) {
  if constexpr (sizeof...(kDims) == 0) {
    run_rows<kDim, C>(p, kv_bound);
  } else if (d == kDim) {
    run_rows<kDim, C>(p, kv_bound);
  } else {
    run_head_dim<C, kDims...>(d, p, kv_bound);
  }
}

// Any head_dim up to 256 (the tiny test models use 16): one warp per (query, head), keys one at a
// time with an online softmax; lanes hold dims lane, lane + 32, ... Slow, and only for head
// dimensions the tiled kernels are not built for.
template <typename C>
__global__ void attention_any_dim_kernel(const float* __restrict__ q, const C* __restrict__ k,
                                         const C* __restrict__ v,
                                         const int32_t* __restrict__ positions, KvRows rows,
                                         int T, int Hq, int Hkv, int D, int capacity, int window,
                                         float scale, float* __restrict__ out) {
  wait_for_inputs();
  constexpr int kMaxPerLane = 8;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= T * Hq) return;
  const int t = row / Hq, h = row % Hq, kvh = h / (Hq / Hkv);
  const int pos = min(positions[t], capacity - 1);
  const int first = window > 0 ? max(0, pos - window + 1) : 0;
  float qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < D ? q[static_cast<int64_t>(row) * D + d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int s = first; s <= pos; ++s) {
    const int64_t at = (rows.row(s) * Hkv + kvh) * D;
    const C* kr = k + at;
    const C* vr = v + at;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dot += qv[i] * load_cache(kr + d);
    }
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float score = dot * scale, m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) acc[i] = acc[i] * correction + p * load_cache(vr + d);
    }
    m = m_new;
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[static_cast<int64_t>(row) * D + d] = acc[i] / l;
  }
}

}  // namespace

KvRows kv_rows(const KvBlocks& blocks) {
  KvRows r;
  if (!blocks.paged()) return r;
  r.table = blocks.table.as<const int32_t>();
  while ((int64_t{1} << r.shift) < blocks.block_tokens) ++r.shift;
  return r;
}

namespace {

// The launch parameters of T queries of q against the caches through `blocks` (for attention_rows,
// the first sequence's: each block takes its own sequence's table).
Params params_of(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                 const Tensor& out, int64_t T, const KvBlocks& blocks, int64_t window, float scale) {
  Params p{};
  p.q = q.as<const float>();
  p.k = k_cache.data;
  p.v = v_cache.data;
  p.positions = positions.as<const int32_t>();
  p.out = out.as<float>();
  p.T = static_cast<int>(T);
  p.Hq = static_cast<int>(q.dim(1));
  p.Hkv = static_cast<int>(k_cache.dim(1));
  p.group = p.Hq / p.Hkv;
  p.rows = kv_rows(blocks);
  p.capacity = static_cast<int>(blocks.capacity(k_cache));
  p.window = window > 0 && window < INT_MAX ? static_cast<int>(window) : 0;  // beyond any position: none
  p.scale_log2 = scale * kLog2e;
  return p;
}

}  // namespace

bool attention_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                    std::span<const KvBlocks> row_blocks, std::span<const int64_t> kv_bounds, float scale,
                    int64_t window, const Tensor& out) {
  const int64_t B = q.dim(0), D = q.dim(2);
  if (B < 2 || B > kRowsMax || D % 32 != 0 || D > 256) return false;
  const auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data) % 16 == 0; };
  if (!aligned(q) || !aligned(k_cache) || !aligned(v_cache) || !aligned(out)) return false;
  const int64_t capacity = row_blocks[0].capacity(k_cache);
  for (const KvBlocks& b : row_blocks)
    if (b.capacity(k_cache) != capacity) return false;
  // T = 1: each sequence's own query.
  const Params p = params_of(q, k_cache, v_cache, positions, out, 1, row_blocks[0], window, scale);
  bool ran = false;
  with_cache_type(k_cache, [&](auto c) {
    ran = run_rows_head_dim<decltype(c), 32, 64, 96, 128, 160, 192, 224, 256>(D, p, row_blocks, kv_bounds);
  });
  return ran;
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& positions, int64_t kv_bound, float scale, int64_t window,
               const Tensor& out, const KvBlocks& blocks) {
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2), Hkv = k_cache.dim(1);
  if (T == 0) return;
  const auto misaligned = [](const Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 != 0;
  };
  if (D > 256)
    throw_cuda_error(cudaErrorInvalidValue, "attention: head_dim must be at most 256", __FILE__,
                     __LINE__);
  // A window beyond any position limits nothing.
  const int win = window > 0 && window < INT_MAX ? static_cast<int>(window) : 0;
  with_cache_type(k_cache, [&](auto c) {
    using C = decltype(c);
    if (D % 32 != 0) {
      constexpr int kWarps = 4;
      const int64_t rows = T * Hq;
      launch(attention_any_dim_kernel<C>, static_cast<unsigned>((rows + kWarps - 1) / kWarps),
             32 * kWarps, 0, q.as<const float>(), k_cache.as<const C>(), v_cache.as<const C>(),
             positions.as<const int32_t>(), kv_rows(blocks), static_cast<int>(T),
             static_cast<int>(Hq), static_cast<int>(Hkv), static_cast<int>(D),
             static_cast<int>(blocks.capacity(k_cache)), win, scale, out.as<float>());
      return;
    }
    if (misaligned(q) || misaligned(k_cache) || misaligned(v_cache) || misaligned(out))
      throw_cuda_error(cudaErrorMisalignedAddress,
                       "attention: q, caches and out must be 16-byte aligned", __FILE__, __LINE__);
    const Params p = params_of(q, k_cache, v_cache, positions, out, T, blocks, window, scale);
    run_head_dim<C, 32, 64, 96, 128, 160, 192, 224, 256>(D, p, kv_bound);
  });
}

}  // namespace strata::backend::cuda
