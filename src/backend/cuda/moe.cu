// Mixture-of-experts ops on the GPU: the router's softmax and top-k (one warp per token), the routed
// experts read straight from the router's output (no host round trip at any step length), and the
// sigmoid-gated shared expert's residual add.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/activations.h"
#include "backend/cuda/bf16_pack.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma.h"
#include "backend/cuda/scale_type.h"
#include "backend/cuda/warp.h"
#include "backend/moe.h"

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
// With `shared`, each row of logits has a last column past the E experts' (the shared expert's gate
// logit), and ids and weights a last slot, k, for expert E with weight sigmoid(that logit).
template <int kPerLane>
__global__ void __launch_bounds__(32 * kTopkWarps)
    topk_softmax_kernel(const float* __restrict__ logits, int64_t T, int E, int k, bool renormalize, bool shared,
                        int32_t* __restrict__ ids, float* __restrict__ weights) {
  wait_for_inputs();
  constexpr int kSlots = kPerLane > 0 ? kPerLane : 1;
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kTopkWarps + threadIdx.x / 32;
  if (t >= T) return;  // whole warps leave together
  const int row = E + (shared ? 1 : 0), slots = k + (shared ? 1 : 0);
  const float* l = logits + t * row;
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

  int32_t* ids_t = ids + t * slots;
  float* w_t = weights + t * slots;
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
  if (shared && lane == 0) {
    ids_t[k] = E;
    w_t[k] = sigmoid(l[E]);  // as add_sigmoid_gated computes the gate
  }
}

template <int kPerLane>
void launch_topk(const Tensor& logits, int64_t E, int64_t k, bool renormalize, bool shared, const Tensor& ids,
                 const Tensor& weights) {
  const int64_t T = logits.dim(0);
  const unsigned blocks = static_cast<unsigned>((T + kTopkWarps - 1) / kTopkWarps);
  launch(topk_softmax_kernel<kPerLane>, blocks, 32 * kTopkWarps, 0, logits.as<const float>(), T, static_cast<int>(E),
         static_cast<int>(k), renormalize, shared, ids.as<int32_t>(), weights.as<float>());
}

// ---- the shared expert's gated add ----

__device__ inline float4 axpy(float4 d, float a, float4 x) {
  return make_float4(__fadd_rn(d.x, __fmul_rn(a, x.x)), __fadd_rn(d.y, __fmul_rn(a, x.y)),
                     __fadd_rn(d.z, __fmul_rn(a, x.z)), __fadd_rn(d.w, __fmul_rn(a, x.w)));
}
__device__ inline float axpy(float d, float a, float x) { return __fadd_rn(d, __fmul_rn(a, x)); }

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


// ---- moe_experts ----
//
// None of the launches needs the routing on the host. A decode step (up to kTokenKernelMaxTokens
// tokens: a batch's decode rows, each token's pairs computed as if it were alone) takes two: SiLU(gate_e · x[t]) ⊙ (up_e · x[t]) for every (token, slot) pair, a block per 32
// of its rows and pair, into a workspace [T·k, I]; then a block per four output rows and token gives
// each of the token's experts to a warp (so all their loads go out at once) and sums
// weight · down_e · act in ascending id. A prompt sorts its pairs by expert first, runs both
// projections in that order, and sums each token's experts in a last launch, with the decode
// kernel's arithmetic: quantized experts as a grouped GEMM on tensor cores (below), float ones (and
// activations that are not 16-byte aligned) by pair, an expert's pairs sharing its rows in L1 and L2.
// The decode and per-pair kernels dequantize in registers (Σ (s·q + b)·x = s·Σ q·x + b·Σ x per
// 16-byte chunk, which never straddles a group); the matrices are small (an expert of
// Qwen3.5-35B-A3B is 0.6 MB at 4 bits), so those kernels are plain: each warp streams four rows, its
// lanes taking every 32nd chunk.

// One matrix of an expert as expert_table() lays it out: codes (or F32 values), scales, biases.
struct ExpertMatrix {
  const void* w;
  const void* scales;
  const void* biases;
};
enum ExpertPart { kGatePart, kUpPart, kDownPart, kParts };

constexpr int kExpertWarps = 8;
constexpr int kExpertRowsPerWarp = 4;
constexpr int kExpertRowsPerBlock = kExpertWarps * kExpertRowsPerWarp;

// Where row `row` of a matrix of K columns starts: its codes (or values), scales and biases.
template <typename S>
struct RowRef {
  const void* w;
  const S* s;
  const S* b;
};
template <int kBits, typename S>
__device__ inline RowRef<S> row_ref(const ExpertMatrix& m, int64_t row, int64_t K, int group_shift) {
  if constexpr (kBits == 0) {
    return {static_cast<const float*>(m.w) + row * K, nullptr, nullptr};
  } else {
    const int64_t groups = K >> group_shift;
    return {static_cast<const uint8_t*>(m.w) + row * (K * kBits / 8), static_cast<const S*>(m.scales) + row * groups,
            static_cast<const S*>(m.biases) + row * groups};
  }
}

// acc[r] += this lane's part of row r · x (x in shared memory, K of it); the warp's 32 parts sum
// to the dot. kBits 0: F32 rows, else 4- or 8-bit codes (LSB first in each 32-bit word, as MLX packs
// them), 16 bytes per chunk.
template <int kBits, typename S, int kR>
__device__ inline void rows_dot(const RowRef<S> (&rows)[kR], int64_t K, int group_shift, const float* x, int lane,
                                float (&acc)[kR]) {
  if constexpr (kBits == 0) {
    for (int64_t i = lane; i < K; i += 32) {
      const float v = x[i];
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fmaf(__ldg(static_cast<const float*>(rows[r].w) + i), v, acc[r]);
    }
  } else {
    constexpr int kPerChunk = 128 / kBits, kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1u;
    const int64_t chunks = K * kBits / 128;
    for (int64_t c = lane; c < chunks; c += 32) {
      uint4 q[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) q[r] = __ldg(static_cast<const uint4*>(rows[r].w) + c);
      const int64_t col = c * kPerChunk, group = col >> group_shift;
      float s[kR], b[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) s[r] = scale_to_float(rows[r].s[group]), b[r] = scale_to_float(rows[r].b[group]);
      const float4* xv = reinterpret_cast<const float4*>(x + col);
      float qx[kR] = {}, sx = 0.0f;
#pragma unroll
      for (int v4 = 0; v4 < kPerChunk / 4; ++v4) {
        const float4 v = xv[v4];
        const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int code = v4 * 4 + j, word = code / kPerWord, shift = kBits * (code % kPerWord);
          sx += e[j];
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            const uint32_t wv = word == 0 ? q[r].x : word == 1 ? q[r].y : word == 2 ? q[r].z : q[r].w;
            qx[r] = fmaf(static_cast<float>((wv >> shift) & kMask), e[j], qx[r]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] += s[r] * qx[r] + b[r] * sx;
    }
  }
}

// act[p, :] = SiLU(gate_e · x[t]) ⊙ (up_e · x[t]) for pair p = t·k + slot, e = ids[p]: a warp takes
// four rows of gate and the same four of up together. Pairs without an expert (an id outside
// [0, E): a NaN router row) are skipped, here and by the down kernels. Block row y takes `per_block`
// pairs in turn: pairs y·per_block … of `pairs`, or those entries of order (the pairs sorted by
// expert, so that a block's pairs mostly share an expert and read its rows from L1, and blocks
// running together share them in L2).
template <int kBits, typename S>
__global__ void __launch_bounds__(32 * kExpertWarps)
    moe_gate_up_kernel(const float* __restrict__ x, const int32_t* __restrict__ ids,
                       const int32_t* __restrict__ order, int64_t pairs, int per_block,
                       const ExpertMatrix* __restrict__ table, int64_t E, int k, int64_t H, int64_t I,
                       int group_shift, float* __restrict__ act) {
  extern __shared__ float4 moe_smem[];
  float* xs = reinterpret_cast<float*>(moe_smem);
  wait_for_inputs();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kExpertRowsPerBlock + warp * kExpertRowsPerWarp;
  for (int j = 0; j < per_block; ++j) {
    const int64_t idx = static_cast<int64_t>(blockIdx.y) * per_block + j;
    if (idx >= pairs) break;  // uniform across the block
    const int64_t p = order != nullptr ? order[idx] : idx, t = p / k;
    const int32_t e = ids[p];
    if (e < 0 || e >= E) continue;  // uniform across the block
    __syncthreads();                // the previous pair's x is no longer read
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) xs[i] = x[t * H + i];
    __syncthreads();
    if (row0 >= I) continue;
    RowRef<S> rows[2 * kExpertRowsPerWarp];  // gate rows, then the same up rows
#pragma unroll
    for (int r = 0; r < kExpertRowsPerWarp; ++r) {
      const int64_t row = min(row0 + r, I - 1);  // rows past the end re-read the last; never stored
      rows[r] = row_ref<kBits, S>(table[e * kParts + kGatePart], row, H, group_shift);
      rows[kExpertRowsPerWarp + r] = row_ref<kBits, S>(table[e * kParts + kUpPart], row, H, group_shift);
    }
    float acc[2 * kExpertRowsPerWarp] = {};
    rows_dot<kBits, S>(rows, H, group_shift, xs, lane, acc);
#pragma unroll
    for (int r = 0; r < kExpertRowsPerWarp; ++r) {
      const float g = warp_sum(acc[r]), u = warp_sum(acc[kExpertRowsPerWarp + r]);
      if (lane == 0 && row0 + r < I) act[p * I + row0 + r] = swiglu(g, u);
    }
  }
}

// The token's slots with an expert (ids tid[0..k)), in ascending expert id, into order[0..used):
// thread 0 sorts them, and the block waits for it.
__device__ void token_slots_in_id_order(const int32_t* tid, int k, int64_t E, int* order, int& used) {
  if (threadIdx.x == 0) {
    int n = 0;
    for (int i = 0; i < k; ++i) {
      const int32_t e = tid[i];
      if (e < 0 || e >= E) continue;
      int j = n++;
      for (; j > 0 && tid[order[j - 1]] > e; --j) order[j] = order[j - 1];
      order[j] = i;
    }
    used = n;
  }
  __syncthreads();
}

// out[t, rows] = Σ over the token's experts in ascending id of weight · (down_e · act). A block takes
// kDownRows rows of one token; its warps take the token's experts, all at once (each expert's dot in
// shared memory), and the sums add them in order. A block has a warp per expert a token has, up to
// kDownMaxWarps (a shared expert folded in as a ninth would otherwise double one warp's work).
constexpr int kDownRows = kExpertRowsPerWarp;
constexpr int kDownMaxWarps = 16;

template <int kBits, typename S>
__global__ void __launch_bounds__(32 * kDownMaxWarps)
    moe_down_kernel(const float* __restrict__ act, const int32_t* __restrict__ ids,
                    const float* __restrict__ weights, const ExpertMatrix* __restrict__ table, int64_t E, int k,
                    int64_t H, int64_t I, int group_shift, float* __restrict__ out) {
  __shared__ int order[kMoeExpertsMaxPerToken];
  __shared__ float dots[kMoeExpertsMaxPerToken][kDownRows];
  __shared__ int used;
  const int64_t t = blockIdx.y, row0 = static_cast<int64_t>(blockIdx.x) * kDownRows;
  wait_for_inputs();
  const int32_t* tid = ids + t * k;
  token_slots_in_id_order(tid, k, E, order, used);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = static_cast<int>(blockDim.x / 32);
  for (int n = warp; n < used; n += warps) {
    const int slot = order[n];
    const ExpertMatrix& m = table[tid[slot] * kParts + kDownPart];
    RowRef<S> rows[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) rows[r] = row_ref<kBits, S>(m, min(row0 + r, H - 1), I, group_shift);
    float acc[kDownRows] = {};
    rows_dot<kBits, S>(rows, I, group_shift, act + (t * k + slot) * I, lane, acc);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const float d = warp_sum(acc[r]);
      if (lane == 0) dots[n][r] = d;
    }
  }
  __syncthreads();
  if (threadIdx.x < kDownRows && row0 + threadIdx.x < H) {
    float sum = 0.0f;
    for (int n = 0; n < used; ++n) sum += weights[t * k + order[n]] * dots[n][threadIdx.x];
    out[t * H + row0 + threadIdx.x] = sum;
  }
}

// For many tokens (a prompt), the down projections by pair, so that pairs of one expert run together
// and share its weights: ypair[p, :] = down_e · act[p] (as the token kernel's dot of each expert),
// then moe_combine_kernel adds them per token. Rows as in the gate/up kernel (a warp takes four),
// and pairs too: per_block entries of order a block row.
template <int kBits, typename S>
__global__ void __launch_bounds__(32 * kExpertWarps)
    moe_down_pairs_kernel(const float* __restrict__ act, const int32_t* __restrict__ ids,
                          const int32_t* __restrict__ order, int64_t pairs, int per_block,
                          const ExpertMatrix* __restrict__ table, int64_t E, int64_t H, int64_t I, int group_shift,
                          float* __restrict__ ypair) {
  wait_for_inputs();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kExpertRowsPerBlock + warp * kExpertRowsPerWarp;
  if (row0 >= H) return;
  for (int j = 0; j < per_block; ++j) {
    const int64_t idx = static_cast<int64_t>(blockIdx.y) * per_block + j;
    if (idx >= pairs) break;
    const int64_t p = order[idx];
    const int32_t e = ids[p];
    if (e < 0 || e >= E) continue;
    RowRef<S> rows[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r)
      rows[r] = row_ref<kBits, S>(table[e * kParts + kDownPart], min(row0 + r, H - 1), I, group_shift);
    float acc[kDownRows] = {};
    rows_dot<kBits, S>(rows, I, group_shift, act + p * I, lane, acc);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const float d = warp_sum(acc[r]);
      if (lane == 0 && row0 + r < H) ypair[p * H + row0 + r] = d;
    }
  }
}

// out[t, :] = Σ over the token's experts in ascending id of weight · ypair[pair], as the token
// kernel sums its dots. A block row per token.
__global__ void __launch_bounds__(kThreads)
    moe_combine_kernel(const float* __restrict__ ypair, const int32_t* __restrict__ ids,
                       const float* __restrict__ weights, int64_t E, int k, int64_t H, float* __restrict__ out) {
  __shared__ int order[kMoeExpertsMaxPerToken];
  __shared__ int used;
  const int64_t t = blockIdx.y;
  wait_for_inputs();
  token_slots_in_id_order(ids + t * k, k, E, order, used);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < H;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int n = 0; n < used; ++n) sum += weights[t * k + order[n]] * ypair[(t * k + order[n]) * H + row];
    out[t * H + row] = sum;
  }
}

// ---- the grouped GEMM of a prompt's pairs ----
//
// A prompt's pairs, sorted by expert, are cut into tiles of up to kTilePairs pairs of one expert. A
// block multiplies one tile by a band of one matrix's rows on tensor cores (mma m16n8k16: bf16
// inputs, fp32 sums), the weights dequantized to bf16 (s·q + b rounded once, as the prefill GEMM
// does) and the activations rounded to bf16 into shared memory kStageK columns at a time, the next
// stage's loads in flight while this one multiplies. So an expert's rows are read and dequantized
// once per tile, where the per-pair kernels do it once per pair. The gate/up launch stacks 8 rows of
// gate over the same 8 rows of up in each 16-row tile: the thread that holds a gate sum holds its up
// sum too and writes SiLU(gate) ⊙ up. The down launch writes each pair's rows for the combine.
// Each output is one pair's dot over k in a fixed order, whatever else shares its tile: the results
// do not depend on the sort's order within an expert.

// Measured on an H100 (35B-A3B 4-bit prefill of 512 / 4096 tokens, tok/s): tiles of 32 pairs with
// two blocks an SM 12,525 / 14,440; three blocks (the kernel held to 80 registers) 12,976 / 14,905;
// four (64 registers) 11,554 / 13,437; tiles of 64 pairs, two blocks, 10,557 / 12,886.
constexpr int kTilePairs = 32;
constexpr int kGemmBlocksPerSm = 3;
constexpr int kTileRows = 128;  // matrix rows a block takes (gate/up: 64 of each)
constexpr int kStageK = 64;     // columns per stage
constexpr int kStagePitch = kStageK + 8;  // bf16 per shared row: 8 rows of a ldmatrix hit distinct banks
constexpr int kGemmWarps = kTileRows / 16;  // a 16-row tile each, by every pair of the tile

// A tile: its expert (−1: past the last tile), where its pairs start in the sorted order, how many.
struct alignas(16) PairTile {
  int32_t expert, first, count, unused;
};
// The most tiles `pairs` sorted pairs of E experts cut into: one partial tile per expert at most.
int64_t max_pair_tiles(int64_t pairs, int64_t E) { return (pairs + kTilePairs - 1) / kTilePairs + E; }

// The pairs of `pairs` (ids[0..pairs)) sorted by expert into order: a counting sort in one block
// (ids outside [0, E) last). The order within an expert varies from run to run; no result depends
// on it (each pair's rows are computed alone, and tokens add their experts in id order). With
// `tiles`, also each expert's pairs cut into tiles of kTilePairs, and the entries up to
// `max_tiles` past the last one marked unused.
__global__ void __launch_bounds__(1024)
    moe_sort_pairs_kernel(const int32_t* __restrict__ ids, int64_t pairs, int64_t E, int32_t* __restrict__ order,
                          PairTile* __restrict__ tiles, int64_t max_tiles) {
  extern __shared__ int bucket[];  // E + 1 counts, then offsets; then E + 1 first tiles
  int* first_tile = bucket + E + 1;
  wait_for_inputs();
  for (int64_t b = threadIdx.x; b <= E; b += blockDim.x) bucket[b] = 0;
  __syncthreads();
  auto bucket_of = [&](int64_t p) {
    const int32_t e = ids[p];
    return e >= 0 && e < E ? static_cast<int64_t>(e) : E;
  };
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) atomicAdd(&bucket[bucket_of(p)], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int start = 0, tile = 0;
    for (int64_t b = 0; b <= E; ++b) {
      const int n = bucket[b];
      bucket[b] = start;
      first_tile[b] = tile;
      start += n;
      if (b < E) tile += (n + kTilePairs - 1) / kTilePairs;
    }
  }
  __syncthreads();
  if (tiles != nullptr) {
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
      const int first = bucket[e], n = bucket[e + 1] - first;
      for (int j = 0; j * kTilePairs < n; ++j)
        tiles[first_tile[e] + j] = {static_cast<int32_t>(e), first + j * kTilePairs,
                                    min(kTilePairs, n - j * kTilePairs), 0};
    }
    for (int64_t i = first_tile[E] + threadIdx.x; i < max_tiles; i += blockDim.x) tiles[i] = {-1, 0, 0, 0};
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x)
    order[atomicAdd(&bucket[bucket_of(p)], 1)] = static_cast<int32_t>(p);
}

struct GemmStage {
  __nv_bfloat16 a[kTileRows][kStagePitch];   // the band's rows
  __nv_bfloat16 b[kTilePairs][kStagePitch];  // the tile's activations
};

// out[p, rows] for the pairs p of tile blockIdx.y and the band blockIdx.x of the matrix's N rows:
// kGateUp: SiLU(gate_e · x) ⊙ (up_e · x) with x = x[p / k_div] (a token's row of the prompt);
// else down_e · x[p] (a pair's row of act). K columns, a multiple of 32.
template <int kBits, typename S, bool kGateUp>
__global__ void __launch_bounds__(32 * kGemmWarps, kGemmBlocksPerSm)
    moe_gemm_kernel(const float* __restrict__ x, int k_div, const int32_t* __restrict__ order,
                    const PairTile* __restrict__ tiles, const ExpertMatrix* __restrict__ table, int64_t K, int64_t N,
                    int group_shift, float* __restrict__ out) {
  extern __shared__ uint4 gemm_smem[];
  auto* stages = reinterpret_cast<GemmStage*>(gemm_smem);
  __shared__ int32_t pair_of[kTilePairs];  // the tile's pairs; −1 past its count
  wait_for_inputs();
  const PairTile tile = tiles[blockIdx.y];
  if (tile.expert < 0) return;  // uniform across the block
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid < kTilePairs) pair_of[tid] = tid < tile.count ? order[tile.first + tid] : -1;
  __syncthreads();

  // Each stage, thread tid dequantizes 32 codes of shared row ar (half ah of the stage's columns;
  // 32 codes never straddle a group of 32 or more) and rounds 8 activations of pair bp.
  const int ar = tid / 2, ah = tid % 2, bp = tid / 8, bk = (tid % 8) * 8;
  int64_t row;
  int part;
  if constexpr (kGateUp) {
    row = static_cast<int64_t>(blockIdx.x) * (kTileRows / 2) + (ar / 16) * 8 + ar % 8;
    part = ar % 16 < 8 ? kGatePart : kUpPart;
  } else {
    row = static_cast<int64_t>(blockIdx.x) * kTileRows + ar;
    part = kDownPart;
  }
  // Rows past N re-read the last one; their sums are never stored.
  const RowRef<S> a_ref = row_ref<kBits, S>(table[tile.expert * kParts + part], min(row, N - 1), K, group_shift);
  const float* b_src = pair_of[bp] >= 0 ? x + static_cast<int64_t>(pair_of[bp] / k_div) * K : nullptr;

  constexpr int kCodeVecs = kBits / 4;  // 16-byte loads of 32 codes
  uint4 codes[kCodeVecs];
  S scale{}, bias{};
  float4 xv[2];
  auto load = [&](int64_t k0) {
    const int64_t ka = k0 + 32 * ah, kb = k0 + bk;
    if (ka < K) {
      const auto* src = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(a_ref.w) + ka * kBits / 8);
#pragma unroll
      for (int i = 0; i < kCodeVecs; ++i) codes[i] = __ldg(src + i);
      scale = a_ref.s[ka >> group_shift];
      bias = a_ref.b[ka >> group_shift];
    }
    const bool b_live = b_src != nullptr && kb < K;
    xv[0] = b_live ? __ldg(reinterpret_cast<const float4*>(b_src + kb)) : make_float4(0.f, 0.f, 0.f, 0.f);
    xv[1] = b_live ? __ldg(reinterpret_cast<const float4*>(b_src + kb + 4)) : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  auto store = [&](GemmStage& st, int64_t k0) {
    uint32_t packed[16] = {};  // columns past K stay zero
    if (k0 + 32 * ah < K) {
      const float s = scale_to_float(scale), b = scale_to_float(bias);
      constexpr int kPerWord = 32 / kBits;
      constexpr uint32_t kMask = (1u << kBits) - 1u;
      auto word = [&](int w) {
        const uint4& v = codes[w / 4];
        return w % 4 == 0 ? v.x : w % 4 == 1 ? v.y : w % 4 == 2 ? v.z : v.w;
      };
#pragma unroll
      for (int i = 0; i < 32; i += 2) {
        const uint32_t w0 = word(i / kPerWord), w1 = word((i + 1) / kPerWord);
        const float lo = __fmaf_rn(s, code_to_float((w0 >> (kBits * (i % kPerWord))) & kMask), b);
        const float hi = __fmaf_rn(s, code_to_float((w1 >> (kBits * ((i + 1) % kPerWord))) & kMask), b);
        packed[i / 2] = pack_bf16x2(lo, hi);
      }
    }
    auto* a_dst = reinterpret_cast<uint4*>(&st.a[ar][32 * ah]);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a_dst[i] = make_uint4(packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]);
    *reinterpret_cast<uint4*>(&st.b[bp][bk]) =
        make_uint4(pack_bf16x2(xv[0].x, xv[0].y), pack_bf16x2(xv[0].z, xv[0].w), pack_bf16x2(xv[1].x, xv[1].y),
                   pack_bf16x2(xv[1].z, xv[1].w));
  };
  float acc[kTilePairs / 8][4] = {};  // [8 pairs][rows g, g + 8 × pairs 2c, 2c + 1]
  auto multiply = [&](const GemmStage& st) {
#pragma unroll
    for (int ks = 0; ks < kStageK / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, &st.a[warp * 16 + lane % 16][ks * 16 + (lane / 16) * 8]);
#pragma unroll
      for (int j = 0; j < kTilePairs / 16; ++j) {
        uint32_t b[4];  // pairs 16j..16j+7 (k low, high), then 16j+8..16j+15
        ldmatrix_x4(b, &st.b[j * 16 + (lane / 16) * 8 + lane % 8][ks * 16 + ((lane / 8) % 2) * 8]);
        mma_bf16(acc[2 * j], a, b[0], b[1]);
        mma_bf16(acc[2 * j + 1], a, b[2], b[3]);
      }
    }
  };

  const int64_t n_stages = (K + kStageK - 1) / kStageK;
  load(0);
  store(stages[0], 0);
  __syncthreads();
  for (int64_t s = 0; s < n_stages; ++s) {
    const bool more = s + 1 < n_stages;
    if (more) load((s + 1) * kStageK);
    multiply(stages[s % 2]);
    if (more) store(stages[(s + 1) % 2], (s + 1) * kStageK);
    __syncthreads();
  }

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int j = 0; j < kTilePairs / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int32_t p = pair_of[j * 8 + 2 * c + h];
      if (p < 0) continue;
      float* dst = out + static_cast<int64_t>(p) * N;
      if constexpr (kGateUp) {
        const int64_t r = static_cast<int64_t>(blockIdx.x) * (kTileRows / 2) + warp * 8 + g;
        if (r < N) dst[r] = swiglu(acc[j][h], acc[j][2 + h]);
      } else {
        const int64_t r = static_cast<int64_t>(blockIdx.x) * kTileRows + warp * 16 + g;
        if (r < N) dst[r] = acc[j][h];
        if (r + 8 < N) dst[r + 8] = acc[j][2 + h];
      }
    }
  }
}

// Whether a prompt's experts take the grouped GEMM: 4/8-bit codes in groups of 32 or more, H and I
// multiples of 32, x's rows 16-byte aligned.
bool grouped_gemm_supports(int bits, int group_size, int64_t H, int64_t I, const float* x) {
  return (bits == 4 || bits == 8) && group_size >= 32 && H % 32 == 0 && I % 32 == 0 && aligned16(x);
}

// Steps of up to this many tokens take the per-token kernels (a decode batch, a speculative verify:
// a token's rows are its bits alone, whatever else the step holds), more the per-pair ones (a
// prompt: an expert's pairs share its weights, on tensor cores where they take the weights).
constexpr int64_t kTokenKernelMaxTokens = kMaxFedRows;
// Pairs a block of the per-pair prompt kernels takes in turn, in expert order. Measured on an H100
// (35B-A3B prefill of 512 tokens, 4-bit / 8-bit tok/s, before the grouped GEMM took quantized
// experts): 1: 2295 / 2834; 2: 2435 / 2979; 4: 2528 / 3118; 8: 2558 / 3160; 16: 2550 / 3148.
constexpr int kPairsPerBlock = 8;
// The most workspace a prompt's chunk of pairs takes (64 MB: 818 tokens of Qwen3.5-35B-A3B, 8
// experts a token, 512 + 2048 floats and an index a pair).
constexpr int64_t kActBudgetBytes = int64_t{64} << 20;

template <int kBits, typename S>
void launch_moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, int64_t E, int group_shift,
                        int64_t I, const Tensor& table, const Tensor& out) {
  const int64_t T = x.dim(0), H = x.dim(1), k = ids.dim(1);
  auto* gate_up = moe_gate_up_kernel<kBits, S>;
  const size_t smem = static_cast<size_t>(H) * sizeof(float);
  static const bool raised = [&] {
    allow_shared_bytes(gate_up, static_cast<size_t>(max_optin_shared_bytes()));
    return true;
  }();
  (void)raised;
  if (smem > static_cast<size_t>(max_optin_shared_bytes()))
    throw_internal_error("moe_experts: the hidden size exceeds shared memory");
  const auto* tab = table.as<const ExpertMatrix>();
  if (T <= kTokenKernelMaxTokens) {
    // A decode step: each pair's SiLU(gate) ⊙ up, then each token's rows with its experts' dots.
    auto* act = static_cast<float*>(workspace(WorkspaceSlot::kMoeAct, static_cast<size_t>(T * k * I) * sizeof(float)));
    launch(gate_up, dim3(static_cast<unsigned>((I + kExpertRowsPerBlock - 1) / kExpertRowsPerBlock),
                         static_cast<unsigned>(T * k)),
           32 * kExpertWarps, smem, x.as<const float>(), ids.as<const int32_t>(), nullptr, T * k, 1, tab, E,
           static_cast<int>(k), H, I, group_shift, act);
    const unsigned down_blocks = static_cast<unsigned>((H + kDownRows - 1) / kDownRows);
    const unsigned down_warps = static_cast<unsigned>(std::clamp<int64_t>(k, 1, kDownMaxWarps));
    launch(moe_down_kernel<kBits, S>, dim3(down_blocks, static_cast<unsigned>(T)), 32 * down_warps, 0,
           static_cast<const float*>(act), ids.as<const int32_t>(), weights.as<const float>(), tab, E,
           static_cast<int>(k), H, I, group_shift, out.as<float>());
    return;
  }
  // A prompt: chunks of tokens whose pairs' intermediate rows (k·(I + H) floats a token) fit the
  // budget, and whose pairs fit a grid's y (kMaxGridY); per chunk the pairs are sorted by expert,
  // both projections run in that order (the grouped GEMM by tiles of an expert's pairs where it
  // takes the weights, else by pair), and each token sums its experts' rows.
  bool grouped = false;
  if constexpr (kBits != 0) grouped = grouped_gemm_supports(kBits, 1 << group_shift, H, I, x.as<const float>());
  const int64_t per_token = k * (I + H) * static_cast<int64_t>(sizeof(float)) + k * static_cast<int64_t>(sizeof(int32_t));
  const int64_t chunk = std::clamp<int64_t>(std::min(kActBudgetBytes / per_token, kMaxGridY / k), 1, T);
  const int64_t max_tiles = max_pair_tiles(chunk * k, E);
  const size_t tile_bytes = static_cast<size_t>(max_tiles) * sizeof(PairTile);
  char* space = static_cast<char*>(
      workspace(WorkspaceSlot::kMoeAct, tile_bytes + static_cast<size_t>(chunk * per_token)));
  auto* tiles = reinterpret_cast<PairTile*>(space);  // the workspace is 256-byte aligned
  auto* act = reinterpret_cast<float*>(space + tile_bytes);
  auto* ypair = act + chunk * k * I;
  auto* order = reinterpret_cast<int32_t*>(ypair + chunk * k * H);
  const size_t sort_smem = static_cast<size_t>(2 * (E + 1)) * sizeof(int);
  if (sort_smem > static_cast<size_t>(max_optin_shared_bytes()))
    throw_internal_error("moe_experts: too many experts to sort in shared memory");
  static const bool sort_raised = [] {
    allow_shared_bytes(moe_sort_pairs_kernel, static_cast<size_t>(max_optin_shared_bytes()));
    return true;
  }();
  (void)sort_raised;
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t n = std::min(chunk, T - t0);
    const int32_t* chunk_ids = ids.as<const int32_t>() + t0 * k;
    const float* chunk_x = x.as<const float>() + t0 * H;
    launch(moe_sort_pairs_kernel, 1, 1024, sort_smem, chunk_ids, n * k, E, order, grouped ? tiles : nullptr,
           max_pair_tiles(n * k, E));
    if constexpr (kBits != 0) {
      if (grouped) {
        const auto tile_blocks = static_cast<unsigned>(max_pair_tiles(n * k, E));
        const size_t gemm_smem = 2 * sizeof(GemmStage);
        launch(moe_gemm_kernel<kBits, S, true>,
               dim3(static_cast<unsigned>((I + kTileRows / 2 - 1) / (kTileRows / 2)), tile_blocks), 32 * kGemmWarps,
               gemm_smem, chunk_x, static_cast<int>(k), static_cast<const int32_t*>(order),
               static_cast<const PairTile*>(tiles), tab, H, I, group_shift, act);
        launch(moe_gemm_kernel<kBits, S, false>,
               dim3(static_cast<unsigned>((H + kTileRows - 1) / kTileRows), tile_blocks), 32 * kGemmWarps, gemm_smem,
               static_cast<const float*>(act), 1, static_cast<const int32_t*>(order),
               static_cast<const PairTile*>(tiles), tab, I, H, group_shift, ypair);
      }
    }
    if (!grouped) {
      const unsigned pair_blocks = static_cast<unsigned>((n * k + kPairsPerBlock - 1) / kPairsPerBlock);
      launch(gate_up, dim3(static_cast<unsigned>((I + kExpertRowsPerBlock - 1) / kExpertRowsPerBlock), pair_blocks),
             32 * kExpertWarps, smem, chunk_x, chunk_ids, static_cast<const int32_t*>(order), n * k, kPairsPerBlock,
             tab, E, static_cast<int>(k), H, I, group_shift, act);
      launch(moe_down_pairs_kernel<kBits, S>,
             dim3(static_cast<unsigned>((H + kExpertRowsPerBlock - 1) / kExpertRowsPerBlock), pair_blocks),
             32 * kExpertWarps, 0, static_cast<const float*>(act), chunk_ids, static_cast<const int32_t*>(order),
             n * k, kPairsPerBlock, tab, E, H, I, group_shift, ypair);
    }
    launch(moe_combine_kernel, dim3(blocks_for(H), static_cast<unsigned>(n)), kThreads, 0,
           static_cast<const float*>(ypair), chunk_ids, weights.as<const float>() + t0 * k, E, static_cast<int>(k), H,
           out.as<float>() + t0 * H);
  }
}

}  // namespace

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last) {
  const int64_t T = logits.dim(0), E = logits.dim(1) - (shared_last ? 1 : 0);
  if (T == 0 || k == 0) return;
  if (E <= 32 * 4) {
    launch_topk<4>(logits, E, k, renormalize, shared_last, ids, weights);
  } else if (E <= 32 * 16) {
    launch_topk<16>(logits, E, k, renormalize, shared_last, ids, weights);
  } else if (E <= 32 * 32) {
    launch_topk<32>(logits, E, k, renormalize, shared_last, ids, weights);
  } else {
    launch_topk<0>(logits, E, k, renormalize, shared_last, ids, weights);
  }
}

void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Weight& gate0, int64_t E,
                 const Tensor& table, const Tensor& out) {
  if (x.dim(0) == 0) return;
  const int64_t I = gate0.rows();
  if (!gate0.quantized()) {
    launch_moe_experts<0, float>(x, ids, weights, E, 0, I, table, out);
    return;
  }
  const int group_shift = __builtin_ctz(static_cast<unsigned>(gate0.group_size));
  with_scale_type(gate0, [&](auto s) {
    using S = decltype(s);
    if (gate0.bits == 4) {
      launch_moe_experts<4, S>(x, ids, weights, E, group_shift, I, table, out);
    } else {
      launch_moe_experts<8, S>(x, ids, weights, E, group_shift, I, table, out);
    }
  });
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
