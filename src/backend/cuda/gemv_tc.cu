// Decode matmul (one activation row) of MLX affine 4/8-bit weights on integer tensor cores.
//
// Math. Row n of W·x is Σ_groups (s·Σ q·x + b·Σ x) over the group's codes q. Each run of 64 (4-bit)
// or 32 (8-bit) activations gets a power-of-two scale 2^e that puts its largest magnitude in
// [2^21, 2^22), and x·2^e is rounded to an integer and split into three signed 8-bit limbs
// (x·2^e ≈ 65536·top + 256·mid + low; 22 significant bits, as the fp32 CPU matmul to about 1e-6
// relative). An mma.sync m16n8k32 u8×s8 multiplies the codes (unsigned bytes) by the limbs with
// exact 32-bit integer sums, so the only roundings are the limbs' and the fp32 folds'.
// Unpacking costs one LOP3 (low nibbles) or SHF+LOP3 (high nibbles) per four 4-bit codes, and
// nothing at 8 bits: the codes are already bytes.
//
// Layout. A warp owns 16 rows (an m-tile) and walks k in tiles of 128 bytes of codes
// per row (256 4-bit or 128 8-bit weights). In a tile, lane (g = lane/4, c = lane%4) loads 32 bytes
// of rows g and g+8: run c, which lies in one quantization group (or two, at 4 bits with groups of
// 32). The mma's k-slots of lane c come from lane c's run only, so B's column pair (2c, 2c+1) holds
// run c's limbs and is zero elsewhere: C[row][2c] (top) and C[row][2c+1] (mid) of the first mma and
// C[row][2c] (low) of the second are row·x over run c alone, and lane c folds them with its own
// group's scale and bias. A step is 8 codes per row: one 32-bit word at 4 bits (low nibbles = codes
// 0,2,4,6 in k-slots 4c..4c+3, high nibbles = codes 1,3,5,7 in 4c+16..4c+19), two words at 8 bits.
//
// Activations. x is converted into B-fragment order (two 16-byte vectors per step and run: {top,
// top, low, low} and {mid, mid, 0, 0} limb words), with each run's 2^-e and activation sums beside
// it, and each block holds all of it in shared memory. Where the op that wrote x handed it over in
// this form (a feed, feed.h: the norms, the GDN core, the attention gate), the blocks copy it.
// Otherwise, up to K = kSeparateConversionMinK each block converts x itself; from there a small
// launch converts it once into a workspace that the blocks copy. The MLP's down projection forms
// SiLU(gate) ⊙ up as it converts (silu_mul_matmul), so that product never takes a launch of its
// own; at decode the gate/up launch writes the product's form itself (GluFeed), so the down
// projection only copies.
//
// Work. The rows' m-tiles are split into one contiguous, nearly equal range per block, with as many
// blocks as are resident at once, so every SM carries the same rows. A block's warps split each
// pass of its range into row groups and k into interleaved slices; each warp loads the next tile's
// codes while it multiplies the current one, and issues its first two tiles' loads before waiting
// on the kernel before it (weights do not depend on it).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/activations.h"
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
using gemv_math::kTileBytes;

constexpr int kMaxWarps = 8;  // per block
// From this K on, a small launch before the matmul converts the activations once, and the matmul's
// blocks copy the result instead of each converting all K. Measured on an H100 (2026-11-22, 9B
// 4-bit decode): converting once for the down projection (K = 12288) took the step from 398 to 419
// tok/s; doing so at K = 4096 too gave 411, the extra launch costing more than it saves there.
constexpr int64_t kSeparateConversionMinK = 8192;

// Dynamic shared memory of a block for K activations: one tile of zeros (the B of lanes outside
// their run's columns), the B vectors of every tile, and per run a float4 {2^-e, Σx of fold 0, Σx of
// fold 1, unused}.
template <int kBits>
size_t shared_bytes(int64_t K) {
  using G = Geometry<kBits>;
  const int64_t tiles = K / G::kTileK;
  return sizeof(uint4) * static_cast<size_t>(G::kTileVecs + tiles * G::kTileVecs + tiles * 4);
}

// The most dynamic shared memory a block of this kernel may use: the device's opt-in limit less a
// margin for the static arrays.
int max_shared_bytes() { return max_optin_shared_bytes() - 4096; }

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 v;
  // Weights are read once per step: streaming loads (.cs, allocated evict-first in L1 and L2).
  // Measured on H100s (2026-11-27, 9B 4-bit decode @512, same calls): 436-438 tok/s with the codes
  // kept out of L1 (.L1::no_allocate), 441-446 with .cs. Not better: .L1::no_allocate with an L2
  // evict_first cache policy (435), .lu (438-439), and .cs on the scales and biases too (432-434).
  asm volatile("ld.global.cs.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <typename S>
__device__ __forceinline__ uint32_t load_raw(const S* p) {
  if constexpr (sizeof(S) == 4) {
    return __float_as_uint(*reinterpret_cast<const float*>(p));
  } else {
    return *reinterpret_cast<const unsigned short*>(p);
  }
}
// Raw scale bits are kept until use: converting at the load measured 3% slower over a 9B decode
// step on an H100 (the kernel of 2026-11-21).
template <typename S>
__device__ __forceinline__ float raw_to_float(uint32_t r) {
  if constexpr (sizeof(S) == 4) {
    return __uint_as_float(r);
  } else {
    const unsigned short h = static_cast<unsigned short>(r);
    return scale_to_float(*reinterpret_cast<const S*>(&h));
  }
}

// Converts activations (K of them; with kGlu, SiLU(gate) ⊙ x) into B vectors and run info: task u
// takes activations 8u..8u+7, step j of run c of tile t, and the kSteps lanes of a run agree on its
// scale through shuffles. Thread `thread` of `threads` (a multiple of 32) takes tasks thread,
// thread + threads, ...
template <int kBits, int kFolds, bool kGlu, bool kRows = false>
__device__ void convert_activations(const float* __restrict__ x, const float* __restrict__ gate, int64_t K,
                                    int64_t thread, int64_t threads, uint4* bvec, float4* info) {
  const int lane = static_cast<int>(thread % 32);
  const int64_t tasks = K / 8;
#pragma unroll 2  // the second pass's loads go out with the first's
  for (int64_t base = thread - lane; base < tasks; base += threads) {
    const int64_t u = base + lane;
    const bool active = u < tasks;  // whole runs are active or not: tasks is a multiple of kSteps
    float v[8] = {};
    if (active) {
      load_task(x, u, v);
      if constexpr (kGlu) {
        float gv[8];
        load_task(gate, u, gv);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = swiglu(gv[i], v[i]);  // as the silu_mul op
      }
    }
    gemv_math::store_converted<kBits, kFolds, kRows>(v, u, active, bvec, info);
  }
}

// The activations of one matmul launch, converted once: B vectors of every tile, then run info (the
// layout of a block's shared memory after its tile of zeros).
// Row blockIdx.y of x (and gate) goes to the form at converted + blockIdx.y · (its length); kRows:
// in the multi-row layout (gemv_math::b_vec).
template <int kBits, int kFolds, bool kGlu, bool kRows = false>
__global__ void __launch_bounds__(128) convert_kernel(const float* __restrict__ x, const float* __restrict__ gate,
                                                     int64_t K, uint4* __restrict__ converted) {
  using G = Geometry<kBits>;
  wait_for_inputs();
  const int64_t tiles = K / G::kTileK, row = blockIdx.y;
  uint4* form = converted + row * tiles * (G::kTileVecs + 4);
  convert_activations<kBits, kFolds, kGlu, kRows>(x + row * K, kGlu ? gate + row * K : gate, K,
                                           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                           static_cast<int64_t>(gridDim.x) * blockDim.x, form,
                                           reinterpret_cast<float4*>(form + tiles * G::kTileVecs));
}

// What a warp loads for one k-tile.
template <int kFolds>
struct TileLoads {
  uint4 code[2][2];       // [row g, g+8][two 16-byte halves of the run]
  uint32_t s[2][kFolds];  // raw scale and bias bits
  uint32_t b[2][kFolds];
};

// The m-tiles of gate/up (two segments of N rows) that may write the down projection's input
// form: SiLU(gate) ⊙ up over N activations (feed.h), in this launch's bits and group folds. Run r
// of it (rows r·kRun.. of both) is complete once its 2·kRun/16 m-tiles are stored; each stores and
// then counts itself at counts[r], and the last to arrive converts the run and resets its count.
struct GluFeed {
  uint4* form = nullptr;  // null: none
  unsigned* counts = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  int64_t n = 0;
};

// A block's m-tile `m` of gate/up is stored: counts it in its run and, where it is the run's last,
// converts the run into glu.form. Called by a whole warp after the block's barrier that follows the
// stores (one warp per m-tile).
template <int kBits, int kFolds>
__device__ void arrive_glu_run(const GluFeed& glu, const WeightSegments& segs, unsigned m) {
  using G = Geometry<kBits>;
  const int lane = threadIdx.x % 32;
  const WeightSegment& seg = unit_segment(segs, m);
  const int64_t run = static_cast<int64_t>(m - seg.first_unit) * 16 / G::kRun;
  unsigned last = 0;
  if (lane == 0) {
    // Release: the block's stores, ordered before this by its barrier. Acquire: the other m-tiles'
    // stores, released by their counts.
    unsigned before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(before)
                 : "l"(glu.counts + run)
                 : "memory");
    last = before == 2 * G::kRun / 16 - 1;
  }
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __syncwarp();  // lane 0's acquire, for the warp's loads
  if (lane == 0) glu.counts[run] = 0;
  const bool active = lane < G::kSteps;
  float v[8] = {};
  if (active) {
    const int64_t k0 = run * G::kRun + 8 * lane;
    const float4 g0 = __ldcg(reinterpret_cast<const float4*>(glu.gate + k0));
    const float4 g1 = __ldcg(reinterpret_cast<const float4*>(glu.gate + k0 + 4));
    const float4 u0 = __ldcg(reinterpret_cast<const float4*>(glu.up + k0));
    const float4 u1 = __ldcg(reinterpret_cast<const float4*>(glu.up + k0 + 4));
    const float gv[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const float uv[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = swiglu(gv[i], uv[i]);  // as silu_mul_matmul's conversion
  }
  write_form<kBits, kFolds>(v, run * G::kSteps + lane, active, glu.form, glu.n);
}

// The matrices' m-tiles (16 rows; `tiles16` of them) are split into gridDim.x contiguous ranges of
// nearly equal length, one per block, so every block carries the same rows give or take one m-tile.
// A block takes its range in passes of row_warps m-tiles; its warps are row_warps row groups ×
// k_warps slices of k: slice w takes k-tiles w, w + k_warps, ...
template <int kBits, int kFolds, bool kGlu, bool kSeparate, typename S>
__global__ void __launch_bounds__(32 * kMaxWarps, 2)
    gemv_tc_kernel(const float* __restrict__ x, const float* __restrict__ gate,
                   const uint4* __restrict__ converted, const WeightSegments segs, int64_t K,
                   int group_shift, int row_warps, unsigned tiles16, const GluFeed glu) {
  using G = Geometry<kBits>;
  constexpr int kFoldSteps = G::kSteps / kFolds;
  using Loads = TileLoads<kFolds>;

  extern __shared__ uint4 smem[];
  const int64_t tiles = K / G::kTileK;
  uint4* zeros = smem;
  uint4* bvec = smem + G::kTileVecs;
  float4* info = reinterpret_cast<float4*>(bvec + tiles * G::kTileVecs);
  __shared__ float partial[kMaxWarps * 16];  // [k slice][row of the pass]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int k_warps = static_cast<int>(blockDim.x / 32) / row_warps;
  const int wr = warp / k_warps, wk = warp % k_warps;
  const int pass_rows = 16 * row_warps;
  const int64_t row_bytes = K * kBits / 8, groups = K >> group_shift;
  // B: lane (n = g, k-slots of c) is nonzero only where column pair n/2 is c's own run; part g%2.
  const bool b_active = (g / 2) == c;
  const int b_lane = c * 2 + g % 2;
  const unsigned first = static_cast<unsigned>(uint64_t{blockIdx.x} * tiles16 / gridDim.x);
  const unsigned last = static_cast<unsigned>((uint64_t{blockIdx.x} + 1) * tiles16 / gridDim.x);

  bool ready = false;  // the block's activations are in shared memory
  for (unsigned pass = first; pass < last; pass += row_warps) {
    const unsigned m_tile = pass + wr;
    const bool busy = m_tile < last;  // warp-uniform: this warp has an m-tile in the pass
    const WeightSegment& seg = unit_segment(segs, busy ? m_tile : first);
    const uint8_t* codes = static_cast<const uint8_t*>(seg.codes);
    const S* __restrict__ scales = static_cast<const S*>(seg.scales);
    const S* __restrict__ biases = static_cast<const S*>(seg.biases);
    const int64_t N = seg.n;
    const int64_t warp_row0 = static_cast<int64_t>(m_tile - seg.first_unit) * 16;
    const int64_t t_end = busy ? tiles : 0;

    // Rows g and g+8 of the warp's m-tile: their codes from this lane's run, and their groups; rows
    // past N re-read the last row and are never stored.
    const uint8_t* code_row[2];
    const S* scale_row[2];
    const S* bias_row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = min(warp_row0 + g + 8 * h, N - 1);
      code_row[h] = codes + row * row_bytes + c * 32;
      scale_row[h] = scales + row * groups + ((c * G::kRun) >> group_shift);
      bias_row[h] = biases + row * groups + ((c * G::kRun) >> group_shift);
    }

    auto load = [&](int64_t t, Loads& l) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* p = code_row[h] + t * kTileBytes;
        l.code[h][0] = load_stream(p);
        l.code[h][1] = load_stream(p + 16);
#pragma unroll
        for (int f = 0; f < kFolds; ++f) {
          // The run starts a group (runs are no longer than groups); fold 1 is the next group.
          const int64_t gi = ((t * G::kTileK) >> group_shift) + f;
          l.s[h][f] = load_raw(scale_row[h] + gi);
          l.b[h][f] = load_raw(bias_row[h] + gi);
        }
      }
    };

    float acc[2] = {};
    auto multiply = [&](int64_t t, const Loads& l) {
      const float4 run = info[t * 4 + c];  // {2^-e, Σx of fold 0, of fold 1}
      const uint4* bp = b_active ? bvec + t * G::kTileVecs + b_lane : zeros;
#pragma unroll
      for (int f = 0; f < kFolds; ++f) {
        int d1[4] = {}, d2[4] = {};  // (top, mid) and (low, 0) of rows g and g+8
        gemv_math::tile_dot<kBits>(l.code, bp, f * kFoldSteps, (f + 1) * kFoldSteps, d1, d2);
        const float run_sum = f == 0 ? run.y : run.z;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float v = gemv_math::row_dot(d1, d2, h);
          acc[h] = gemv_math::fold_run(acc[h], v, raw_to_float<S>(l.s[h][f]), run.x, raw_to_float<S>(l.b[h][f]),
                                       run_sum);
        }
      }
    };

    // Two tiles in flight per warp: the next one loads while this one multiplies. The first two are
    // issued before the wait: the weights do not depend on the kernel before; the activations do.
    Loads a, b;
    int64_t t = wk;
    if (t < t_end) load(t, a);
    if (t + k_warps < t_end) load(t + k_warps, b);
    if (!ready) {
      for (int i = threadIdx.x; i < G::kTileVecs; i += blockDim.x) zeros[i] = make_uint4(0u, 0u, 0u, 0u);
      wait_for_inputs_then_release();
      if constexpr (kSeparate) {
        const int64_t n = tiles * (G::kTileVecs + 4);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) copy_async16(bvec + i, converted + i);
        copy_async_wait_all();
      } else {
        convert_activations<kBits, kFolds, kGlu>(x, gate, K, threadIdx.x, blockDim.x, bvec, info);
      }
      __syncthreads();
      ready = true;
    }
    while (t < t_end) {
      multiply(t, a);
      const int64_t t1 = t + k_warps, t2 = t1 + k_warps;
      if (t1 >= t_end) break;
      if (t2 < t_end) load(t2, a);
      multiply(t1, b);
      if (t2 + k_warps < t_end) load(t2 + k_warps, b);
      t = t2;
    }

    // Sum the four runs (lanes c = 0..3 of a row), then the k slices, in a fixed order.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float r = acc[h];
      r += __shfl_xor_sync(0xffffffffu, r, 1);
      r += __shfl_xor_sync(0xffffffffu, r, 2);
      if (c == 0) partial[wk * pass_rows + wr * 16 + g + 8 * h] = r;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < pass_rows; i += blockDim.x) {
      const unsigned m = pass + i / 16;
      if (m >= last) continue;
      const WeightSegment& out_seg = unit_segment(segs, m);
      const int64_t row = static_cast<int64_t>(m - out_seg.first_unit) * 16 + i % 16;
      if (row >= out_seg.n) continue;
      float r = 0.0f;
      for (int w = 0; w < k_warps; ++w) r += partial[w * pass_rows + i];
      out_seg.out[row] = r;
    }
    __syncthreads();  // partial is rewritten in the next pass
  }
  // The block's m-tiles are stored (the barrier above): each warp counts some of them in.
  if (glu.form != nullptr)
    for (unsigned m = first + warp; m < last; m += blockDim.x / 32)
      arrive_glu_run<kBits, kFolds>(glu, segs, m);
}

// A launch's shape: m-tiles per pass (row_warps), the block's k slices, and the grid.
struct Shape {
  int row_warps, k_warps;
  unsigned grid;
};

// As many blocks as are resident at once (or one per m-tile, if fewer), and the block shape that
// takes the longest range in the fewest tile steps per warp, counting one more per pass for the
// pipeline filling; ties go to fewer passes, and no block has more row groups than m-tiles.
// Tuning::gemv_row_warps (1, 2, 4 or 8) fixes the row groups per block, for tuning.
Shape choose_shape(unsigned tiles16, int64_t tiles, int resident_blocks) {
  const int forced = tuning().gemv_row_warps;
  const unsigned grid = std::min<unsigned>(tiles16, static_cast<unsigned>(resident_blocks));
  const int64_t longest = (tiles16 + grid - 1) / grid;
  Shape best{};
  int64_t best_cost = 0;
  for (int row_warps = kMaxWarps; row_warps >= 1; row_warps /= 2) {
    int k_warps = kMaxWarps / row_warps;
    while (k_warps > 1 && tiles < 2 * k_warps) k_warps /= 2;
    const int64_t cost = (longest + row_warps - 1) / row_warps * ((tiles + k_warps - 1) / k_warps + 1);
    const Shape s{row_warps, k_warps, grid};
    if (forced == row_warps) return s;
    if (row_warps > longest) continue;  // row groups that would have no m-tile
    if (best.grid == 0 || cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

// The one-row kernel for this format, allowed the shared memory it may take (once).
template <int kBits, int kFolds, bool kGlu, bool kSeparate, typename S>
auto* one_row_kernel() {
  // Converted separately, the activations arrive with SiLU(gate) ⊙ up formed: one matmul kernel serves both.
  auto* kernel = gemv_tc_kernel<kBits, kFolds, kGlu && !kSeparate, kSeparate, S>;
  static const bool raised = [&] {
    allow_shared_bytes(kernel, static_cast<size_t>(max_shared_bytes()));
    return true;
  }();
  (void)raised;
  return kernel;
}

// Blocks resident at once over the device for K: the fewest of the one-row kernels a call of this
// format may take (converting in its blocks, or copying a form), so that the launch shape, and with
// it the order of a row's sums over k, does not depend on where the activations come from; the
// multi-row kernel takes the same shape's k slices (gemv_tc_rows). An instance sees few distinct K,
// and eager steps (MoE) alternate them, so each is asked of the runtime once per host thread (a
// cache of each thread's own: no lock on the launch path).
template <int kBits, int kFolds, bool kGlu, typename S>
int resident_blocks(int64_t K) {
  thread_local std::vector<std::pair<int64_t, int>> blocks_per_sm;
  auto known = std::find_if(blocks_per_sm.begin(), blocks_per_sm.end(), [&](const auto& e) { return e.first == K; });
  if (known == blocks_per_sm.end()) {
    const size_t smem = shared_bytes<kBits>(K);
    int in_blocks = 0, copying = 0;
    STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &in_blocks, one_row_kernel<kBits, kFolds, kGlu, false, S>(), 32 * kMaxWarps, smem));
    STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &copying, one_row_kernel<kBits, kFolds, kGlu, true, S>(), 32 * kMaxWarps, smem));
    known = blocks_per_sm.insert(blocks_per_sm.end(), {K, std::max(std::min(in_blocks, copying), 1)});
  }
  return known->second * sm_count();
}

// The launch shape of one row of ws.
template <int kBits, int kFolds, bool kGlu, typename S>
Shape one_row_shape(std::span<const Weight* const> ws, int64_t K, unsigned tiles16) {
  return choose_shape(tiles16, K / Geometry<kBits>::kTileK, resident_blocks<kBits, kFolds, kGlu, S>(K));
}

// kSeparate: the blocks copy the activations' form, the feed's (`form`) or else one a small launch
// converts first.
template <int kBits, int kFolds, bool kGlu, bool kSeparate, typename S>
void launch_gemv(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x,
                 const float* gate, int64_t K, const uint4* form, const GluFeed& glu) {
  auto* kernel = one_row_kernel<kBits, kFolds, kGlu, kSeparate, S>();
  const size_t smem = shared_bytes<kBits>(K);
  WeightSegments segs;
  const unsigned tiles16 = make_segments(ws, outs, 16, segs);
  const Shape shape = one_row_shape<kBits, kFolds, kGlu, S>(ws, K, tiles16);
  const int group_shift = __builtin_ctz(static_cast<unsigned>(ws[0]->group_size));
  const uint4* converted = form;
  if constexpr (kSeparate) {
    if (converted == nullptr) {
      auto* own = static_cast<uint4*>(workspace(WorkspaceSlot::kMatmulX, form_bytes(kBits, K)));
      const int64_t threads = K / 8;
      launch(convert_kernel<kBits, kFolds, kGlu>, static_cast<unsigned>((threads + 127) / 128), 128,
             0, x, gate, K, own);
      converted = own;
    }
  }
  launch(kernel, shape.grid, 32 * shape.row_warps * shape.k_warps, smem, x, gate, converted, segs,
         K, group_shift, shape.row_warps, tiles16, glu);
}

}  // namespace

bool gemv_tc_glu_feed_ok(std::span<const Weight* const> ws, const Weight& down) {
  return ws.size() == 2 && ws[0]->rows() == ws[1]->rows() && down.cols() == ws[0]->rows() &&
         down.bits == ws[0]->bits && down.group_size == ws[0]->group_size &&
         gemv_tc_supported(down);
}

bool gemv_tc_supported(const Weight& w) {
  if (!w.quantized() || (w.bits != 4 && w.bits != 8)) return false;
  if (w.group_size != 32 && w.group_size != 64 && w.group_size != 128) return false;
  const int64_t row_bytes = w.cols() * w.bits / 8;
  if (row_bytes % kTileBytes != 0) return false;
  // The block holds all K activations in shared memory.
  const size_t smem = w.bits == 4 ? shared_bytes<4>(w.cols()) : shared_bytes<8>(w.cols());
  if (smem > static_cast<size_t>(max_shared_bytes())) return false;
  const DType st = w.scales.dtype;
  return st == DType::kF32 || st == DType::kBF16 || st == DType::kF16;
}

void gemv_tc(const float* x, const float* gate, std::span<const Weight* const> ws,
             std::span<float* const> outs, const uint4* form, const FeedForm& glu_form) {
  if (ws.empty() || ws.size() > static_cast<size_t>(kMaxSegments)) throw_internal_error("gemv_tc: 1 to 4 weights");
  const Weight& w0 = *ws[0];
  const int64_t K = w0.cols();
  GluFeed glu;
  if (glu_form.data != nullptr) {
    // gate/up of this launch's format: gemv_tc_glu_feed_ok checked the shapes. One count a run.
    const int64_t runs = glu_form.K / run_length(glu_form.bits);
    glu = GluFeed{glu_form.data,
                  static_cast<unsigned*>(workspace(WorkspaceSlot::kFeedCounts,
                                                   sizeof(unsigned) * static_cast<size_t>(runs))),
                  outs[0], outs[1], glu_form.K};
  }
  auto with_flag = [](bool v, auto f) {
    if (v) {
      f(std::true_type{});
    } else {
      f(std::false_type{});
    }
  };
  // The down projection's SiLU(gate) ⊙ up, or plain activations; converted in the blocks, or once.
  with_weight_format(w0, [&](auto bits, auto folds, auto s) {
    using S = decltype(s);
    with_flag(gate != nullptr, [&](auto glu_in) {
      with_flag(form != nullptr || K >= kSeparateConversionMinK, [&](auto separate) {
        launch_gemv<bits.value, folds.value, glu_in.value, separate.value, S>(ws, outs, x, gate, K,
                                                                              form, glu);
      });
    });
  });
}

void gemv_tc_rows(const float* x, const float* gate, int64_t T, std::span<const Weight* const> ws,
                  std::span<float* const> outs, const uint4* forms) {
  if (ws.empty() || ws.size() > static_cast<size_t>(kMaxSegments)) throw_internal_error("gemv_tc_rows: 1 to 4 weights");
  if (T < 1) return;
  const Weight& w0 = *ws[0];
  const int64_t K = w0.cols();
  with_weight_format(w0, [&](auto bits, auto folds, auto s) {
    using S = decltype(s);
    constexpr int kBits = bits.value, kFolds = folds.value;
    WeightSegments segs;
    const unsigned tiles16 = make_segments(ws, outs, 16, segs);
    // The k slices of the one-row launch this row would get alone: its sums in the same order.
    const int k_warps = gate != nullptr ? one_row_shape<kBits, kFolds, true, S>(ws, K, tiles16).k_warps
                                        : one_row_shape<kBits, kFolds, false, S>(ws, K, tiles16).k_warps;
    if (forms == nullptr) {
      auto* own = static_cast<uint4*>(workspace(WorkspaceSlot::kMatmulX, static_cast<size_t>(T) * form_bytes(kBits, K)));
      const int64_t threads = K / 8;
      const dim3 grid(static_cast<unsigned>((threads + 127) / 128), static_cast<unsigned>(T));
      if (gate != nullptr) {
        launch(convert_kernel<kBits, kFolds, true, true>, grid, 128, 0, x, gate, K, own);
      } else {
        launch(convert_kernel<kBits, kFolds, false, true>, grid, 128, 0, x, gate, K, own);
      }
      forms = own;
    }
    const int staged = tuning().gemv_staged_rows;
    if (staged > 0 && T >= staged) {
      launch_gemv_staged(forms, T, ws, outs, k_warps);
    } else {
      launch_gemv_rows(forms, T, ws, outs, k_warps);
    }
  });
}

}  // namespace strata::backend::cuda
