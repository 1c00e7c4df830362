// Mixture-of-experts ops on the GPU: the router's softmax and top-k (one warp per token), moving
// token rows into and out of an expert's batch, and the sigmoid-gated shared expert's residual add.
// The row lists arrive as device tensors (backend/moe.cpp stages the host lists in stream order).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/activations.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_copy.h"

namespace strata::backend::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr int64_t kMaxGridY = 65535;

unsigned blocks_for(int64_t work) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}
unsigned grid_y_for(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxGridY));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---- topk_softmax ----

constexpr int kTopkWarps = 8;  // tokens per block

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The order top-k walks (larger probability first, the lower expert on ties) as one 64-bit key:
// the bits of p ≥ 0 (which order like the floats) above the complement of e. Distinct experts
// have distinct keys; 0 is "none" (a NaN probability, a padding slot, or nothing left).
__device__ inline uint64_t topk_key(float p, int e) {
  if (!(p >= 0.0f)) return 0;
  return (static_cast<uint64_t>(__float_as_uint(p)) << 32) | static_cast<uint32_t>(~e);
}
// The warp's largest key in two single-instruction reductions (high word, then the low word among
// the lanes that hold that high word) instead of a five-step shuffle butterfly.
__device__ inline uint64_t warp_max_key(uint64_t v) {
  const uint32_t hi = __reduce_max_sync(0xffffffffu, static_cast<uint32_t>(v >> 32));
  const uint32_t lo = __reduce_max_sync(
      0xffffffffu, static_cast<uint32_t>(v >> 32) == hi ? static_cast<uint32_t>(v) : 0u);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// The largest of keys[0, n) below `limit` (0 if none), as a tree of depth log2(n).
template <int n>
__device__ inline uint64_t max_key_below(const uint64_t* keys, uint64_t limit) {
  if constexpr (n == 0) {
    return 0;
  } else if constexpr (n == 1) {
    return keys[0] < limit ? keys[0] : 0;
  } else {
    const uint64_t a = max_key_below<n / 2>(keys, limit),
                   b = max_key_below<n - n / 2>(keys + n / 2, limit);
    return a > b ? a : b;
  }
}

// One warp per token. Lane l holds the keys of experts l, l+32, …: the first kPerLane of them in
// registers, any beyond (E > 32·kPerLane) recomputed from the logits when needed (same arithmetic,
// same key). Round r takes the largest key below round r-1's winner: a max over the lane's keys
// (a tree, not a chain), then a reduction across the warp, so a round costs little latency and
// nothing has to be marked as taken. Every lane ends a round with the winner, so every lane keeps
// the running sum (in selection order, as the CPU adds them up) and lane r % 32 keeps round r's
// choice for one coalesced write at the end; rounds past 32 (k > 32) go straight to memory.
template <int kPerLane>
__global__ void __launch_bounds__(32 * kTopkWarps)
    topk_softmax_kernel(const float* __restrict__ logits, int64_t T, int E, int k, bool renormalize,
                        int32_t* __restrict__ ids, float* __restrict__ weights) {
  wait_for_inputs();
  constexpr int kSlots = kPerLane > 0 ? kPerLane : 1;
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kTopkWarps + threadIdx.x / 32;
  if (t >= T) return;  // whole warps leave together
  const float* l = logits + t * E;
  float p[kSlots];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    p[j] = e < E ? l[e] : -INFINITY;
    mx = fmaxf(mx, p[j]);
  }
  for (int e = lane + 32 * kPerLane; e < E; e += 32) mx = fmaxf(mx, l[e]);
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    p[j] = lane + 32 * j < E ? expf(p[j] - mx) : 0.0f;
    sum += p[j];
  }
  for (int e = lane + 32 * kPerLane; e < E; e += 32) sum += expf(l[e] - mx);
  sum = warp_sum(sum);
  uint64_t keys[kSlots];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    keys[j] = lane + 32 * j < E ? topk_key(p[j] / sum, lane + 32 * j) : 0;

  int32_t* ids_t = ids + t * k;
  float* w_t = weights + t * k;
  uint64_t prev = ~uint64_t{0};
  float top = 0.0f, mine_p = 0.0f;
  int mine_e = 0;
  for (int round = 0; round < k; ++round) {
    uint64_t best = max_key_below<kPerLane>(keys, prev);
    for (int e = lane + 32 * kPerLane; e < E; e += 32) {
      const uint64_t key = topk_key(expf(l[e] - mx) / sum, e);
      if (key < prev && key > best) best = key;
    }
    best = warp_max_key(best);
    // Only NaN probabilities (NaN or infinite logits) leave nothing: expert 0 with weight 0,
    // rather than an index that would address memory out of bounds downstream. prev = 0 then
    // ends the search for the remaining rounds.
    const float bp = best != 0 ? __uint_as_float(static_cast<uint32_t>(best >> 32)) : 0.0f;
    const int be = best != 0 ? static_cast<int>(~static_cast<uint32_t>(best)) : 0;
    top += bp;
    if (round < 32) {
      if (lane == round) mine_p = bp, mine_e = be;
    } else if (lane == 0) {
      ids_t[round] = be;
      w_t[round] = bp;
    }
    prev = best;
  }
  if (lane < k) {
    ids_t[lane] = mine_e;
    w_t[lane] = renormalize ? mine_p / top : mine_p;
  }
  if (renormalize && lane == 0)
    for (int i = 32; i < k; ++i) w_t[i] /= top;  // reads back this thread's own writes
}

template <int kPerLane>
void launch_topk(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids,
                 const Tensor& weights) {
  const int64_t T = logits.dim(0);
  const unsigned blocks = static_cast<unsigned>((T + kTopkWarps - 1) / kTopkWarps);
  launch(topk_softmax_kernel<kPerLane>, blocks, 32 * kTopkWarps, 0, logits.as<const float>(), T,
         static_cast<int>(logits.dim(1)), static_cast<int>(k), renormalize, ids.as<int32_t>(),
         weights.as<float>());
}

// ---- row movement ----

__device__ inline float4 axpy(float4 d, float a, float4 x) {
  return make_float4(__fadd_rn(d.x, __fmul_rn(a, x.x)), __fadd_rn(d.y, __fmul_rn(a, x.y)),
                     __fadd_rn(d.z, __fmul_rn(a, x.z)), __fadd_rn(d.w, __fmul_rn(a, x.w)));
}
__device__ inline float axpy(float d, float a, float x) { return __fadd_rn(d, __fmul_rn(a, x)); }

// d += a·x as fire-and-forget atomic adds of the rounded product (so a lone add rounds as the
// CPU's `d += a * x` does). sm_90 adds four floats in one 16-byte atomic; the compute_80 PTX
// fallback adds them one by one.
__device__ inline void atomic_axpy(float4* d, float a, float4 x) {
  const float4 v =
      make_float4(__fmul_rn(a, x.x), __fmul_rn(a, x.y), __fmul_rn(a, x.z), __fmul_rn(a, x.w));
#if __CUDA_ARCH__ >= 900
  atomicAdd(d, v);
#else
  float* f = reinterpret_cast<float*>(d);
  atomicAdd(f, v.x), atomicAdd(f + 1, v.y), atomicAdd(f + 2, v.z), atomicAdd(f + 3, v.w);
#endif
}
__device__ inline void atomic_axpy(float* d, float a, float x) { atomicAdd(d, __fmul_rn(a, x)); }

// dst[rows[i], :] += scale[i] · src[i, :] with atomicAdd. In our use the rows of one call are
// distinct (a token appears once in an expert's batch), where a plain read-modify-write would do,
// but the atomic version was not slower there: on an H200, float4 atomics took 1.32 µs against
// 1.49 µs for one row of 2048 (decode) and 2.9 against 3.2 µs for 512 rows, and were 5% slower
// only for one call of 4096+ rows (59 against 56 µs at 4096 × 4096). So duplicate rows are
// summed correctly too, in no fixed order.
// Rows outside dst are skipped.
template <typename V>
__global__ void scatter_add_rows_kernel(const V* __restrict__ src, const int32_t* __restrict__ rows,
                                        const float* __restrict__ scale, int64_t n, int64_t cols,
                                        V* dst, int64_t dst_rows) {
  wait_for_inputs();
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int64_t r = rows[i];
    if (r < 0 || r >= dst_rows) continue;
    const float a = scale[i];
    const V* s = src + i * cols;
    V* d = dst + r * cols;
    for (int64_t c = c0; c < cols; c += stride) atomic_axpy(d + c, a, s[c]);
  }
}

// x[r, :] += sigmoid(gate[r]) · y[r, :], the gate computed as the CPU does: 1 / (1 + e^-g).
template <typename V>
__global__ void add_sigmoid_gated_kernel(V* x, const V* __restrict__ y,
                                         const float* __restrict__ gate, int64_t rows,
                                         int64_t cols) {
  wait_for_inputs();
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float s = sigmoid(gate[r]);
    for (int64_t c = c0; c < cols; c += stride)
      x[r * cols + c] = axpy(x[r * cols + c], s, y[r * cols + c]);
  }
}

}  // namespace

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids,
                  const Tensor& weights) {
  const int64_t T = logits.dim(0), E = logits.dim(1);
  if (T == 0 || k == 0) return;
  if (E <= 32 * 4) {
    launch_topk<4>(logits, k, renormalize, ids, weights);
  } else if (E <= 32 * 16) {
    launch_topk<16>(logits, k, renormalize, ids, weights);
  } else if (E <= 32 * 32) {
    launch_topk<32>(logits, k, renormalize, ids, weights);
  } else {
    launch_topk<0>(logits, k, renormalize, ids, weights);
  }
}

void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) {
  copy_rows(src.data, rows.as<const int32_t>(), src.dim(0), out.data, nullptr, rows.numel(), rows.numel(),
            src.dim(1) * static_cast<int64_t>(sizeof(float)));
}

void scatter_add_rows(const Tensor& src, const Tensor& rows, const Tensor& scale,
                      const Tensor& dst) {
  const int64_t n = rows.numel(), C = src.dim(1);
  if (n == 0 || C == 0) return;
  const auto* r = rows.as<const int32_t>();
  const auto* s = scale.as<const float>();
  if (C % 4 == 0 && aligned16(src.data) && aligned16(dst.data)) {
    const dim3 grid(blocks_for(C / 4), grid_y_for(n));
    launch(scatter_add_rows_kernel<float4>, grid, kThreads, 0, src.as<const float4>(), r, s, n,
           C / 4, dst.as<float4>(), dst.dim(0));
  } else {
    const dim3 grid(blocks_for(C), grid_y_for(n));
    launch(scatter_add_rows_kernel<float>, grid, kThreads, 0, src.as<const float>(), r, s, n, C,
           dst.as<float>(), dst.dim(0));
  }
}

void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate) {
  const int64_t rows = gate.numel();
  if (rows == 0 || x.numel() == 0) return;
  const int64_t C = x.numel() / rows;
  const auto* g = gate.as<const float>();
  if (C % 4 == 0 && aligned16(x.data) && aligned16(y.data)) {
    const dim3 grid(blocks_for(C / 4), grid_y_for(rows));
    launch(add_sigmoid_gated_kernel<float4>, grid, kThreads, 0, x.as<float4>(),
           y.as<const float4>(), g, rows, C / 4);
  } else {
    const dim3 grid(blocks_for(C), grid_y_for(rows));
    launch(add_sigmoid_gated_kernel<float>, grid, kThreads, 0, x.as<float>(), y.as<const float>(),
           g, rows, C);
  }
}

}  // namespace strata::backend::cuda
