// The small ops of a decoder step on the GPU: embedding lookup (float or MLX-quantized tables),
// bias, rotary embedding, KV-cache row stores, SwiGLU, residual add, sigmoid gating, column splits
// and greedy argmax. All are memory-bound: 16-byte accesses where alignment allows, else scalar.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "backend/cuda/activations.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_copy.h"
#include "backend/cuda/scale_type.h"

namespace strata::backend::cuda {

namespace {

constexpr int kThreads = 256;
// Grid-stride loops take over beyond this many blocks: 132 SMs are full long before.
constexpr int64_t kMaxBlocks = 4096;
constexpr int64_t kMaxGridY = 65535;

unsigned blocks_for(int64_t work, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + threads - 1) / threads, 1, kMaxBlocks));
}
unsigned grid_y_for(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxGridY));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The widest access unit (16, 8, 4, 2 or 1 bytes) that divides every size and address OR-ed into
// `bits` (an OR keeps every low bit that any of them has set).
int unit_bytes(uint64_t bits) {
  for (int u = 16; u > 1; u /= 2)
    if (bits % u == 0) return u;
  return 1;
}
uint64_t bits_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

template <int kBytes>
struct Unit;
template <>
struct Unit<16> {
  using type = uint4;
};
template <>
struct Unit<8> {
  using type = uint2;
};
template <>
struct Unit<4> {
  using type = uint32_t;
};
template <>
struct Unit<2> {
  using type = uint16_t;
};
template <>
struct Unit<1> {
  using type = uint8_t;
};

// ---- row copies: embedding of a float table, store_rows ----

// dst row (dst_rows ? dst_rows[i] : i) = src row (src_rows ? src_rows[i] : i), rows of `units`
// access units. An index outside its tensor (validated on the host, but device code must not
// trust it) zeroes the destination row when the source index is bad, and skips the row when the
// destination index is.
template <typename U>
__global__ void copy_rows_kernel(const U* __restrict__ src, const int32_t* __restrict__ src_rows,
                                 int64_t src_limit, U* __restrict__ dst,
                                 const int32_t* __restrict__ dst_rows, int64_t dst_limit, int64_t n,
                                 int64_t units) {
  wait_for_inputs();
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int64_t s = src_rows != nullptr ? src_rows[i] : i;
    const int64_t d = dst_rows != nullptr ? dst_rows[i] : i;
    if (d < 0 || d >= dst_limit) continue;
    U* out = dst + d * units;
    if (s < 0 || s >= src_limit) {
      for (int64_t c = c0; c < units; c += stride) out[c] = U{};
      continue;
    }
    const U* in = src + s * units;
    for (int64_t c = c0; c < units; c += stride) out[c] = in[c];
  }
}

template <int kUnit>
void launch_copy_rows(const void* src, const int32_t* src_rows, int64_t src_limit, void* dst,
                      const int32_t* dst_rows, int64_t dst_limit, int64_t n, int64_t row_bytes) {
  using U = typename Unit<kUnit>::type;
  const int64_t units = row_bytes / kUnit;
  const dim3 grid(blocks_for(units), grid_y_for(n));
  launch(copy_rows_kernel<U>, grid, kThreads, 0, static_cast<const U*>(src), src_rows, src_limit,
         static_cast<U*>(dst), dst_rows, dst_limit, n, units);
}

// ---- quantized embedding ----

// s·q + b rounded twice, as the CPU reference computes it (no fused multiply-add).
__device__ inline float dequant(float s, uint32_t q, float b) {
  return __fadd_rn(__fmul_rn(s, static_cast<float>(q)), b);
}

// Bit widths that divide 32 (2, 4, 8): one thread per packed word writes its 32/kBits values, with
// 16-byte stores when kVec (output rows 16-byte aligned).
template <int kBits, bool kVec, typename S>
__global__ void embedding_affine_kernel(const uint32_t* __restrict__ codes,
                                        const S* __restrict__ scales, const S* __restrict__ biases,
                                        const int32_t* __restrict__ ids, int64_t T, int64_t V,
                                        int64_t H, int group_size, float* __restrict__ out) {
  wait_for_inputs();
  constexpr int kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  const int64_t words = H / kPerWord, groups = H / group_size;
  const int64_t w0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
    const int64_t id = ids[t];
    float* o = out + t * H;
    const bool valid = id >= 0 && id < V;
    for (int64_t w = w0; w < words; w += stride) {
      float v[kPerWord];
      if (valid) {
        const uint32_t word = __ldg(codes + id * words + w);
        const int64_t g = w * kPerWord / group_size;  // a word never straddles groups (group ≥ 32)
        const float s = scale_to_float(scales[id * groups + g]), b = scale_to_float(biases[id * groups + g]);
#pragma unroll
        for (int j = 0; j < kPerWord; ++j) v[j] = dequant(s, (word >> (kBits * j)) & kMask, b);
      } else {
#pragma unroll
        for (int j = 0; j < kPerWord; ++j) v[j] = 0.0f;
      }
      float* dst = o + w * kPerWord;
      if constexpr (kVec) {
#pragma unroll
        for (int j = 0; j < kPerWord; j += 4)
          *reinterpret_cast<float4*>(dst + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
      } else {
#pragma unroll
        for (int j = 0; j < kPerWord; ++j) dst[j] = v[j];
      }
    }
  }
}

// Any other bit width (3, 5, 6): one thread per value, which may straddle two words.
template <typename S>
__global__ void embedding_affine_any_kernel(const uint32_t* __restrict__ codes,
                                            const S* __restrict__ scales,
                                            const S* __restrict__ biases,
                                            const int32_t* __restrict__ ids, int64_t T, int64_t V,
                                            int64_t H, int64_t words, int bits, int group_size,
                                            float* __restrict__ out) {
  wait_for_inputs();
  const int64_t groups = H / group_size;
  const uint32_t mask = (1u << bits) - 1u;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
    const int64_t id = ids[t];
    const bool valid = id >= 0 && id < V;
    for (int64_t c = c0; c < H; c += stride) {
      float v = 0.0f;
      if (valid) {
        const uint32_t* row = codes + id * words;
        const uint64_t bit = static_cast<uint64_t>(c) * bits;
        const uint32_t shift = bit & 31;
        uint64_t q = row[bit >> 5] >> shift;
        if (shift + bits > 32) q |= static_cast<uint64_t>(row[(bit >> 5) + 1]) << (32 - shift);
        const int64_t g = c / group_size;
        v = dequant(scale_to_float(scales[id * groups + g]), static_cast<uint32_t>(q) & mask,
                    scale_to_float(biases[id * groups + g]));
      }
      out[t * H + c] = v;
    }
  }
}

template <int kBits, typename S>
void launch_embedding_affine(const Weight& table, const int32_t* ids, int64_t T, int64_t H,
                             float* out) {
  constexpr int kPerWord = 32 / kBits;
  const dim3 grid(blocks_for(H / kPerWord), grid_y_for(T));
  const auto* codes = table.w.as<const uint32_t>();
  const auto* s = static_cast<const S*>(table.scales.data);
  const auto* b = static_cast<const S*>(table.biases.data);
  if (aligned(out, 16)) {  // H is a multiple of the group size (≥ 32), so every row is aligned too
    launch(embedding_affine_kernel<kBits, true, S>, grid, kThreads, 0, codes, s, b, ids, T,
           table.rows(), H, table.group_size, out);
  } else {
    launch(embedding_affine_kernel<kBits, false, S>, grid, kThreads, 0, codes, s, b, ids, T,
           table.rows(), H, table.group_size, out);
  }
}

// ---- elementwise ----

struct SiluMul {
  __device__ float operator()(float gate, float up) const { return swiglu(gate, up); }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SigmoidMul {
  __device__ float operator()(float x, float gate) const { return x / (1.0f + expf(-gate)); }
};

// out[i] = op(a[i], b[i]); out may alias a (no __restrict__). kVec: all three 16-byte aligned, the
// first n/4·4 elements as float4 and the last n % 4 scalar.
template <typename Op, bool kVec>
__global__ void binary_kernel(const float* a, const float* b, float* out, int64_t n) {
  wait_for_inputs();
  const Op op;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t i = tid; i < n4; i += stride) {
      const float4 x = reinterpret_cast<const float4*>(a)[i];
      const float4 y = reinterpret_cast<const float4*>(b)[i];
      reinterpret_cast<float4*>(out)[i] =
          make_float4(op(x.x, y.x), op(x.y, y.y), op(x.z, y.z), op(x.w, y.w));
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) out[i] = op(a[i], b[i]);
}

// binary_kernel's op over one row of n values (16-byte aligned) that also writes the row's form for
// the matmul it feeds (feed.h): thread τ of the grid takes task τ, 8 values, as the form lies.
template <typename Op, int kBits, int kFolds>
__global__ void binary_feed_kernel(const float* a, const float* b, float* out, int64_t n,
                                   uint4* form) {
  wait_for_inputs();
  const Op op;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = u < n / 8;
  float v[8] = {};
  if (active) {
    float xs[8], ys[8];
    load_task(a, u, xs);
    load_task(b, u, ys);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = op(xs[i], ys[i]);
    float4* o = reinterpret_cast<float4*>(out) + 2 * u;
    o[0] = make_float4(v[0], v[1], v[2], v[3]), o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
  write_form<kBits, kFolds>(v, u, active, form, n);
}

template <typename Op>
void launch_binary(const float* a, const float* b, float* out, int64_t n) {
  if (n == 0) return;
  if (aligned(a, 16) && aligned(b, 16) && aligned(out, 16)) {
    launch(binary_kernel<Op, true>, blocks_for(std::max<int64_t>(n / 4, 1)), kThreads, 0, a, b, out,
           n);
  } else {
    launch(binary_kernel<Op, false>, blocks_for(n), kThreads, 0, a, b, out, n);
  }
}

// x[r, c] += bias[c] over columns of `cols` units (float4 or float): one thread per column keeps
// its bias value in a register across the rows it visits.
template <typename V>
__global__ void add_bias_kernel(V* x, const V* __restrict__ bias, int64_t rows, int64_t cols) {
  wait_for_inputs();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const V b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    V& v = x[r * cols + c];
    if constexpr (sizeof(V) == 16) {
      v = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
    } else {
      v += b;
    }
  }
}

// ---- rope ----

constexpr int kRopeMaxHalf = 256;  // rotary_dim ≤ 512 (checked by the dispatcher)
constexpr int kRopeThreads = 128;

// The frequencies travel inside the launch's parameters (1 KB of the 4 KB allowed): nothing is
// uploaded per call, so a captured graph replays the launch as it is.
struct RopeFreqs {
  float inv_freq[kRopeMaxHalf];
};

// Block (t, y): token t, heads [y·heads_per_block, …). cos and sin of the token's angles are
// computed once per block into shared memory, then every pair of those heads rotates. The pair
// arithmetic is spelled with _rn intrinsics so that it rounds like the CPU reference (no FMA).
__global__ void rope_kernel(float* x, const int32_t* __restrict__ positions, int64_t H, int64_t D,
                            int half, int heads_per_block, bool neox, float attention_factor,
                            RopeFreqs freqs) {
  wait_for_inputs();
  __shared__ float cos_t[kRopeMaxHalf], sin_t[kRopeMaxHalf];
  const int64_t t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = pos * freqs.inv_freq[i];  // fp32, as transformers computes it
    float s, c;
    sincosf(angle, &s, &c);  // the accurate version: angles reach 10⁵ radians and more
    cos_t[i] = c * attention_factor;
    sin_t[i] = s * attention_factor;
  }
  __syncthreads();
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * heads_per_block;
  const int64_t nh = std::min<int64_t>(heads_per_block, H - h0);
  float* base = x + (t * H + h0) * D;
  for (int64_t j = threadIdx.x; j < nh * half; j += blockDim.x) {
    const int64_t h = j / half;
    const int i = static_cast<int>(j - h * half);
    float* v = base + h * D;
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, cos_t[i]), __fmul_rn(x1, sin_t[i]));
    v[b] = __fadd_rn(__fmul_rn(x1, cos_t[i]), __fmul_rn(x0, sin_t[i]));
  }
}

// ---- split_columns ----

constexpr int kMaxSplits = 8;  // outputs per launch; more take one launch per 8

// Output pointers and widths, passed by value (graph-capturable, no upload). Widths and offsets
// are in access units; offsets are relative to column `col0` of the launch.
struct SplitOutputs {
  void* ptr[kMaxSplits];
  int64_t width[kMaxSplits];
  int64_t offset[kMaxSplits];
  int count;
};

// Each thread reads consecutive units of an x row (coalesced) and finds the output its column
// belongs to by a scan of at most 8 offsets.
template <typename U>
__global__ void split_columns_kernel(const U* __restrict__ x, int64_t rows, int64_t row_units,
                                     int64_t col0, int64_t ncols, SplitOutputs outs) {
  wait_for_inputs();
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const U* in = x + r * row_units + col0;
    for (int64_t c = c0; c < ncols; c += stride) {
      int j = 0;
      while (j + 1 < outs.count && c >= outs.offset[j + 1]) ++j;
      static_cast<U*>(outs.ptr[j])[r * outs.width[j] + (c - outs.offset[j])] = in[c];
    }
  }
}

template <int kUnit>
void launch_split(const Tensor& x, std::span<const Tensor> outs, int64_t rows, size_t es) {
  using U = typename Unit<kUnit>::type;
  const int64_t row_units = x.dim(1) * static_cast<int64_t>(es) / kUnit;
  int64_t col0 = 0;
  for (size_t first = 0; first < outs.size(); first += kMaxSplits) {
    SplitOutputs o{};
    o.count = static_cast<int>(std::min<size_t>(kMaxSplits, outs.size() - first));
    int64_t ncols = 0;
    for (int j = 0; j < o.count; ++j) {
      const Tensor& t = outs[first + j];
      o.ptr[j] = t.data;
      o.width[j] = t.dim(1) * static_cast<int64_t>(es) / kUnit;
      o.offset[j] = ncols;
      ncols += o.width[j];
    }
    if (ncols > 0) {
      const dim3 grid(blocks_for(ncols), grid_y_for(rows));
      launch(split_columns_kernel<U>, grid, kThreads, 0, static_cast<const U*>(x.data), rows,
             row_units, col0, ncols, o);
    }
    col0 += ncols;
  }
}

// ---- argmax ----

constexpr int kArgmaxThreads = 256;
constexpr int64_t kArgmaxChunk = 8192;  // elements per block: 32 per thread, 31 blocks a 248K row

struct Best {
  float v;
  int32_t i;
};
constexpr int32_t kNone = 0x7fffffff;  // no candidate yet: any non-NaN value beats it

// The CPU's rule (`row[i] > row[best]` from the front) picks the lowest index of the largest
// non-NaN value; NaNs never win. Ties go to the lower index here, so the merge order is free.
__device__ inline bool better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

__device__ inline void warp_best(float& v, int32_t& i) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, i, offset);
    if (better(ov, oi, v, i)) v = ov, i = oi;
  }
}

// The final index of a row: the CPU starts from index 0 and a NaN there is never beaten.
__device__ inline int32_t final_index(const float* row, int32_t bi) {
  return (isnan(row[0]) || bi == kNone) ? 0 : bi;
}

// The best of [begin, end) of a row, a thread's share (every kArgmaxThreads-th element).
__device__ inline void scan_best(const float* row, int64_t begin, int64_t end, float& bv, int32_t& bi) {
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kArgmaxThreads) {
    const float v = __ldg(row + i);
    if (better(v, static_cast<int32_t>(i), bv, bi)) bv = v, bi = static_cast<int32_t>(i);
  }
}

// The block's best of its threads' (bv, bi), in lane 0 of warp 0 (the other threads' are partial).
// Ends with a barrier, so that `warp_bests` may be used again.
__device__ inline void block_best(float& bv, int32_t& bi, Best (&warp_bests)[kArgmaxThreads / 32]) {
  warp_best(bv, bi);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_bests[warp] = {bv, bi};
  __syncthreads();
  if (warp == 0) {
    bv = lane < kArgmaxThreads / 32 ? warp_bests[lane].v : -INFINITY;
    bi = lane < kArgmaxThreads / 32 ? warp_bests[lane].i : kNone;
    warp_best(bv, bi);
  }
  __syncthreads();
}

// A warp's merge of a row's chunk results (partial[0, chunks)): the best index, in lane 0.
__device__ inline int32_t chunks_best(const Best* partial, int64_t chunks) {
  float bv = -INFINITY;
  int32_t bi = kNone;
  for (int64_t c = threadIdx.x; c < chunks; c += 32) {
    const Best b = partial[c];
    if (better(b.v, b.i, bv, bi)) bv = b.v, bi = b.i;
  }
  warp_best(bv, bi);
  return bi;
}

// Block (chunk, row): the best of its chunk, written to partial[row, chunk]; without partial (a
// single chunk per row) the block writes the answer itself.
template <bool kVec>
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_partial_kernel(const float* __restrict__ x, int64_t rows, int64_t V,
                          Best* __restrict__ partial, int32_t* __restrict__ out) {
  wait_for_inputs();
  __shared__ Best warp_bests[kArgmaxThreads / 32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kArgmaxChunk;
  const int64_t end = std::min(V, begin + kArgmaxChunk);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* row = x + r * V;
    float bv = -INFINITY;
    int32_t bi = kNone;
    if constexpr (kVec) {  // V % 4 == 0 and x aligned: chunk bounds are float4 bounds too
      const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll 4
      for (int64_t q = begin / 4 + threadIdx.x; q < end / 4; q += kArgmaxThreads) {
        const float4 v = __ldg(row4 + q);
        const int32_t i = static_cast<int32_t>(4 * q);
        if (better(v.x, i, bv, bi)) bv = v.x, bi = i;
        if (better(v.y, i + 1, bv, bi)) bv = v.y, bi = i + 1;
        if (better(v.z, i + 2, bv, bi)) bv = v.z, bi = i + 2;
        if (better(v.w, i + 3, bv, bi)) bv = v.w, bi = i + 3;
      }
    } else {
      scan_best(row, begin, end, bv, bi);
    }
    block_best(bv, bi, warp_bests);
    if (threadIdx.x == 0) {
      if (partial == nullptr) {
        out[r] = final_index(row, bi);
      } else {
        partial[r * gridDim.x + blockIdx.x] = {bv, bi};
      }
    }
  }
}

// One warp per row merges the row's chunk results.
__global__ void argmax_merge_kernel(const Best* __restrict__ partial, int64_t chunks,
                                    const float* __restrict__ x, int64_t V,
                                    int32_t* __restrict__ out) {
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  const int32_t bi = chunks_best(partial + r * chunks, chunks);
  if (threadIdx.x == 0) out[r] = final_index(x + r * V, bi);
}

// Rows that lie apart (argmax_rows): block (chunk, i) takes chunk `chunk` of row i, as
// argmax_partial_kernel's block (chunk, i) would for rows back to back; the merge is
// argmax_merge_rows_kernel's.
constexpr int kArgmaxRowsMax = 64;
struct ArgmaxRows {
  const float* x[kArgmaxRowsMax];
  int32_t* out[kArgmaxRowsMax];
};

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows_partial_kernel(const ArgmaxRows rows, int64_t V, Best* __restrict__ partial) {
  wait_for_inputs();
  __shared__ Best warp_bests[kArgmaxThreads / 32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kArgmaxChunk;
  const int64_t end = std::min(V, begin + kArgmaxChunk);
  const float* row = rows.x[blockIdx.y];
  float bv = -INFINITY;
  int32_t bi = kNone;
  scan_best(row, begin, end, bv, bi);
  block_best(bv, bi, warp_bests);
  if (threadIdx.x == 0) partial[blockIdx.y * gridDim.x + blockIdx.x] = {bv, bi};
}

__global__ void argmax_merge_rows_kernel(const Best* __restrict__ partial, int64_t chunks, const ArgmaxRows rows) {
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  const int32_t bi = chunks_best(partial + r * chunks, chunks);
  if (threadIdx.x == 0) *rows.out[r] = final_index(rows.x[r], bi);
}

// argmax_partial_kernel over rows × chunks (grid), with float4 loads where the rows allow them.
void launch_chunk_bests(const float* x, int64_t rows, int64_t V, dim3 grid, Best* partial, int32_t* out) {
  if (V % 4 == 0 && aligned(x, 16)) {
    launch(argmax_partial_kernel<true>, grid, kArgmaxThreads, 0, x, rows, V, partial, out);
  } else {
    launch(argmax_partial_kernel<false>, grid, kArgmaxThreads, 0, x, rows, V, partial, out);
  }
}

}  // namespace

void copy_rows(const void* src, const int32_t* src_rows, int64_t src_limit, void* dst,
               const int32_t* dst_rows, int64_t dst_limit, int64_t n, int64_t row_bytes) {
  if (n == 0 || row_bytes == 0) return;
  switch (unit_bytes(bits_of(src) | bits_of(dst) | static_cast<uint64_t>(row_bytes))) {
    case 16:
      launch_copy_rows<16>(src, src_rows, src_limit, dst, dst_rows, dst_limit, n, row_bytes);
      break;
    case 8:
      launch_copy_rows<8>(src, src_rows, src_limit, dst, dst_rows, dst_limit, n, row_bytes);
      break;
    case 4:
      launch_copy_rows<4>(src, src_rows, src_limit, dst, dst_rows, dst_limit, n, row_bytes);
      break;
    case 2:
      launch_copy_rows<2>(src, src_rows, src_limit, dst, dst_rows, dst_limit, n, row_bytes);
      break;
    default:
      launch_copy_rows<1>(src, src_rows, src_limit, dst, dst_rows, dst_limit, n, row_bytes);
  }
}

void embedding(const Weight& table, const Tensor& ids, const Tensor& out) {
  const int64_t T = ids.numel(), H = table.cols();
  if (T == 0 || H == 0) return;
  const auto* id = ids.as<const int32_t>();
  if (!table.quantized()) {
    copy_rows(table.w.data, id, table.rows(), out.data, nullptr, T, T,
              H * static_cast<int64_t>(sizeof(float)));
    return;
  }
  float* o = out.as<float>();
  with_scale_type(table, [&](auto scale_type) {
    using S = decltype(scale_type);
    switch (table.bits) {
      case 2:
        launch_embedding_affine<2, S>(table, id, T, H, o);
        break;
      case 4:
        launch_embedding_affine<4, S>(table, id, T, H, o);
        break;
      case 8:
        launch_embedding_affine<8, S>(table, id, T, H, o);
        break;
      default: {
        const dim3 grid(blocks_for(H), grid_y_for(T));
        launch(embedding_affine_any_kernel<S>, grid, kThreads, 0, table.w.as<const uint32_t>(),
               static_cast<const S*>(table.scales.data), static_cast<const S*>(table.biases.data),
               id, T, table.rows(), H, table.w.dim(1), table.bits, table.group_size, o);
      }
    }
  });
}

void add_bias(const Tensor& x, const Tensor& bias) {
  const int64_t N = bias.numel();
  if (N == 0 || x.numel() == 0) return;
  const int64_t rows = x.numel() / N;
  if (N % 4 == 0 && aligned(x.data, 16) && aligned(bias.data, 16)) {
    const dim3 grid(static_cast<unsigned>((N / 4 + kThreads - 1) / kThreads), grid_y_for(rows));
    launch(add_bias_kernel<float4>, grid, kThreads, 0, x.as<float4>(), bias.as<const float4>(),
           rows, N / 4);
  } else {
    const dim3 grid(static_cast<unsigned>((N + kThreads - 1) / kThreads), grid_y_for(rows));
    launch(add_bias_kernel<float>, grid, kThreads, 0, x.as<float>(), bias.as<const float>(), rows,
           N);
  }
}

void rope(const Tensor& x, const Tensor& positions, const RopeParams& params) {
  const int64_t T = x.dim(0), H = x.dim(1), D = x.dim(2);
  const int half = params.rotary_dim / 2;
  if (T == 0 || H == 0 || half == 0) return;
  RopeFreqs freqs{};
  std::copy_n(params.inv_freq.begin(), std::min(half, kRopeMaxHalf), freqs.inv_freq);
  // About two pairs per thread: a decode step's few heads still spread over several blocks.
  const int heads_per_block = std::max(1, 2 * kRopeThreads / half);
  const dim3 grid(static_cast<unsigned>(T),
                  static_cast<unsigned>((H + heads_per_block - 1) / heads_per_block));
  launch(rope_kernel, grid, kRopeThreads, 0, x.as<float>(), positions.as<const int32_t>(), H, D,
         half, heads_per_block, params.neox, params.attention_factor, freqs);
}

void store_rows(const Tensor& src, const Tensor& positions, const Tensor& dst) {
  const int64_t T = src.dim(0);
  if (T == 0) return;
  const int64_t row_bytes = static_cast<int64_t>(src.nbytes()) / T;
  copy_rows(src.data, nullptr, T, dst.data, positions.as<const int32_t>(), dst.dim(0), T,
            row_bytes);
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  launch_binary<SiluMul>(gate.as<const float>(), up.as<const float>(), out.as<float>(),
                         gate.numel());
}

void add(const Tensor& a, const Tensor& b) {
  launch_binary<Add>(a.as<const float>(), b.as<const float>(), a.as<float>(), a.numel());
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out, MatmulFeed* feed) {
  const int64_t n = x.numel();
  const bool fits = aligned(x.data, 16) && aligned(gate.data, 16) && aligned(out.data, 16);
  const int64_t K = out.rank() > 0 ? out.dim(-1) : 1;
  const FeedForm form = begin_feed(FeedKind::kSigmoidMul, feed, out.data, K > 0 ? n / K : 0, K, fits);
  if (form.data != nullptr) {
    // One row: n is the matmul's K, whole 128-byte tiles, so n / 8 tasks fill whole warps but for
    // half of one at 8 bits, whose lanes hold zeros.
    with_form_format(form, [&](auto bits, auto folds) {
      launch(binary_feed_kernel<SigmoidMul, bits.value, folds.value>, blocks_for(n / 8), kThreads,
             0, x.as<const float>(), gate.as<const float>(), out.as<float>(), n, form.data);
    });
    return;
  }
  launch_binary<SigmoidMul>(x.as<const float>(), gate.as<const float>(), out.as<float>(), n);
}

void split_columns(const Tensor& x, std::span<const Tensor> outs) {
  const int64_t rows = x.dim(0);
  const size_t es = dtype_size(x.dtype);
  if (rows == 0 || x.dim(1) == 0 || outs.empty()) return;
  uint64_t bits = bits_of(x.data) | static_cast<uint64_t>(x.dim(1)) * es;
  for (const Tensor& o : outs) bits |= bits_of(o.data) | static_cast<uint64_t>(o.dim(1)) * es;
  switch (unit_bytes(bits)) {
    case 16:
      launch_split<16>(x, outs, rows, es);
      break;
    case 8:
      launch_split<8>(x, outs, rows, es);
      break;
    case 4:
      launch_split<4>(x, outs, rows, es);
      break;
    case 2:
      launch_split<2>(x, outs, rows, es);
      break;
    default:
      launch_split<1>(x, outs, rows, es);
  }
}

void argmax_rows(std::span<const Tensor> xs, std::span<const Tensor> outs) {
  const int64_t V = xs[0].numel();
  const int64_t chunks = (V + kArgmaxChunk - 1) / kArgmaxChunk;
  for (size_t first = 0; first < xs.size(); first += kArgmaxRowsMax) {
    const size_t n = std::min<size_t>(kArgmaxRowsMax, xs.size() - first);
    ArgmaxRows rows{};
    for (size_t i = 0; i < n; ++i) {
      rows.x[i] = xs[first + i].as<const float>();
      rows.out[i] = outs[first + i].as<int32_t>();
    }
    auto* partial = static_cast<Best*>(
        workspace(WorkspaceSlot::kSample, n * static_cast<size_t>(chunks) * sizeof(Best)));
    launch(argmax_rows_partial_kernel, dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(n)),
           kArgmaxThreads, 0, rows, V, partial);
    launch(argmax_merge_rows_kernel, static_cast<unsigned>(n), 32, 0, partial, chunks, rows);
  }
}

void argmax(const Tensor& x, const Tensor& out) {
  const int64_t V = x.dim(-1);
  if (V == 0 || x.numel() == 0) return;
  const int64_t rows = x.numel() / V;
  const int64_t chunks = (V + kArgmaxChunk - 1) / kArgmaxChunk;
  const float* px = x.as<const float>();
  int32_t* po = out.as<int32_t>();
  Best* partial = nullptr;
  if (chunks > 1)
    partial = static_cast<Best*>(
        workspace(WorkspaceSlot::kSample, static_cast<size_t>(rows * chunks) * sizeof(Best)));
  const dim3 grid(static_cast<unsigned>(chunks), grid_y_for(rows));
  launch_chunk_bests(px, rows, V, grid, partial, po);
  if (chunks > 1) {
    launch(argmax_merge_kernel, static_cast<unsigned>(rows), 32, 0, partial, chunks, px, V, po);
  }
}

}  // namespace strata::backend::cuda
