// A persistent alternative to the decode step's matmul launches, measured: the matmuls of a
// Qwen3.5-9B 4-bit decode step (per layer: the input projections, the out projection, gate/up,
// SiLU(gate) ⊙ up converted once, the down projection; the lm_head left out) run as ONE kernel with
// one block per SM. It asks whether a kernel that never ends between matrices streams the weights
// closer to the memory bandwidth than the launches of bench_cuda_chain do.
//
// Design:
// - Weights are repacked into tile order. A unit is 16 rows × 256 weights: 2048 bytes of codes in the
//   order the lanes read them, then 256 bytes of BF16 scales and biases. A block's share of a
//   matrix is one contiguous range of units, an equal share of the matrix's units (an m-tile may be
//   split between two blocks).
// - Warp 0 (one lane) streams the block's units, matrix after matrix, into a ring of shared-memory
//   stages of 16 units with bulk copies (cp.async.bulk, mbarrier transaction counts). It never
//   waits for activations, so its copies run ahead across matrix boundaries as far as the ring
//   allows.
// - 16 consumer warps take one unit each per stage and multiply it with the decode matmul's integer
//   tensor-core math (gemv_math.h). Per matrix they:
//   - wait on a counter (every block adds 1 when its rows of the previous matrix are written);
//   - convert x into shared memory;
//   - sum their units' partial rows in shared memory, in a fixed order.
// - A row of an m-tile split between two blocks is written as two parts that the reader adds, so
//   every sum has a fixed order and no atomics touch the data.
//
// Rows of the table:
// - plain 16-byte loads: a copy-bandwidth reference;
// - ring + mma only: the same kernel with no per-matrix work and no waits (timing only), the
//   streaming bound of this design;
// - no waits: the per-matrix conversion and reduction but no dependency (timing only);
// - the chain: every dependency honoured.
// Before timing, the first five matrices' outputs are checked against a host reference.
// The same table times the launched form (below): one launch a matrix of a ring kernel small enough
// that two fit an SM, with PDL, released on entry, after its wait or once its producer has issued
// its last copy, optionally gated per SM (a producer starts once the previous matrix's producer on
// its SM is done) and optionally prefetching the stages past its ring into L2; its first five
// matrices are checked as the chain's are.
// A second table times the dataflow form (below) with W = 1, 2 and 4 waves a matrix, with and
// without its waits, after checking one layer's four matrices for each W.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_math.h"

namespace {

namespace gm = strata::backend::cuda::gemv_math;
using G = gm::Geometry<4>;

constexpr int kConsumerWarps = 16;
constexpr int kThreads = 32 * (kConsumerWarps + 1);
constexpr int kCodeBytes = 16 * gm::kTileBytes;     // 2048
constexpr int kUnitBytes = kCodeBytes + 32 * 8;     // + per lane {2 scales, 2 biases} as BF16
constexpr int kStageUnits = kConsumerWarps;         // one unit per consumer warp
constexpr int kStageBytes = kStageUnits * kUnitBytes;
constexpr int kMaxTiles = 12288 / G::kTileK;        // the down projection's K
constexpr int kMaxBlockMTiles = 16;                 // m-tiles one block touches in one matrix

enum Flags : int { kNoWaits = 1, kEvictFirst = 2, kBare = 4 };

// One matrix of the chain (kind kMatmul), or the SiLU(gate) ⊙ up conversion (kConvert).
enum Kind : int { kMatmul = 0, kConvert = 1 };
struct Phase {
  const uint8_t* units;
  int m_tiles, k_tiles;
  const float* in;         // two parts of in_stride values each
  int64_t in_stride;
  const float* gate;       // kConvert: the gate's parts (stride in_stride)
  const uint4* converted;  // kMatmul: x already converted (B vectors then run info), or null
  float* out;              // kMatmul: two parts of out_stride values each
  int64_t out_stride;
  uint4* convert_out;      // kConvert
  int kind;
};

__device__ __forceinline__ uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void barrier_init(uint64_t* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_addr(b)), "r"(count));
}
__device__ __forceinline__ void barrier_expect(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_addr(b)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_addr(b)) : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* b, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n" ::
          "r"(shared_addr(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar, bool evict_first,
                                          uint64_t policy) {
  if (evict_first) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
        "%4;" ::"r"(shared_addr(dst)),
        "l"(src), "r"(bytes), "r"(shared_addr(bar)), "l"(policy)
        : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     shared_addr(dst)),
                 "l"(src), "r"(bytes), "r"(shared_addr(bar))
                 : "memory");
  }
}
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(32 * kConsumerWarps) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// An L2 cache policy that marks the lines a copy brings in as the first to evict.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy = 0;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// The ring's start, by thread 0 of the block: each slot's `full` barrier (the producer's one arrival
// and the copy's bytes) and `empty` barrier (one arrival per consumer warp), made visible to the
// copies; and by every thread, the tile of zero B vectors. The caller synchronizes the block.
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, int stages, unsigned consumers,
                                          uint4* zeros) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) barrier_init(&full[i], 1), barrier_init(&empty[i], consumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int i = static_cast<int>(threadIdx.x); i < G::kTileVecs; i += blockDim.x) zeros[i] = make_uint4(0u, 0u, 0u, 0u);
}

// The producer's copy of the kernel's stage s (n units from src) into its ring slot, once the
// consumers have freed the slot; a slot holds stage_units units.
__device__ __forceinline__ void fill_stage(uint8_t* ring, uint64_t* full, uint64_t* empty, unsigned s, int stages,
                                           const uint8_t* src, unsigned n, bool evict_first, uint64_t policy,
                                           int stage_units = kStageUnits) {
  const unsigned slot = s % stages;
  barrier_wait(&empty[slot], ((s / stages) & 1) ^ 1);
  barrier_expect(&full[slot], n * kUnitBytes);
  bulk_copy(ring + slot * stage_units * kUnitBytes, src, n * kUnitBytes, &full[slot], evict_first, policy);
}

// One unit in the ring (16 rows × 256 weights) times x's tile: bp holds this lane's B vectors (or
// zeros), run its run's info. Adds the lane's share of rows g and g + 8 to acc.
__device__ __forceinline__ void unit_dot(const uint8_t* unit, const uint4* bp, float4 run, int lane,
                                         float (&acc)[2]) {
  const uint4* cu = reinterpret_cast<const uint4*>(unit);
  uint4 code[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int half = 0; half < 2; ++half) code[h][half] = cu[(h * 2 + half) * 32 + lane];
  const uint2 meta = reinterpret_cast<const uint2*>(unit + kCodeBytes)[lane];
  int d1[4] = {}, d2[4] = {};
  gm::tile_dot<4>(code, bp, 0, G::kSteps, d1, d2);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float scale = __uint_as_float(h == 0 ? meta.x << 16 : meta.x & 0xFFFF0000u);
    const float bias = __uint_as_float(h == 0 ? meta.y << 16 : meta.y & 0xFFFF0000u);
    acc[h] += gm::row_dot(d1, d2, h) * (scale * run.x) + bias * run.y;
  }
}

// A row's sum over the four lanes (c = 0..3) that hold its parts.
__device__ __forceinline__ float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// A block's equal share [first, last) of n items.
struct Share {
  int64_t first, last;
};
__device__ __forceinline__ Share share(int64_t n) {
  return {n * blockIdx.x / gridDim.x, n * (blockIdx.x + 1) / gridDim.x};
}

// A phase's kConvert work: tiles first, first + step, ... below last of SiLU(gate) ⊙ up (both read
// as two parts), converted into B vectors and run info; a warp a tile.
__device__ __forceinline__ void convert_gate_up(const Phase& ph, int64_t first, int64_t last, int step, int lane) {
  float4* info = reinterpret_cast<float4*>(ph.convert_out + ph.k_tiles * G::kTileVecs);
  for (int64_t t = first; t < last; t += step) {
    const int64_t u = t * 32 + lane;
    float v[8];
    for (int i = 0; i < 8; ++i) {
      const int64_t k = 8 * u + i;
      const float gt = __ldcg(ph.gate + k) + __ldcg(ph.gate + ph.in_stride + k);
      const float up = __ldcg(ph.in + k) + __ldcg(ph.in + ph.in_stride + k);
      v[i] = gt / (1.0f + expf(-gt)) * up;
    }
    gm::store_converted<4, 1>(v, u, true, ph.convert_out, info);
  }
}

// A matrix's x into shared memory by `warps` consumer warps (cw the caller's): copied when it was
// converted by a kConvert phase, else converted from its two parts.
__device__ __forceinline__ void load_x(const Phase& ph, int cw, int warps, int lane, uint4* bvec, float4* info) {
  if (ph.converted != nullptr) {
    const int n = ph.k_tiles * (G::kTileVecs + 4);
    for (int i = cw * 32 + lane; i < n; i += 32 * warps) bvec[i] = __ldcg(ph.converted + i);
    return;
  }
  for (int t = cw; t < ph.k_tiles; t += warps) {
    const int64_t u = t * 32 + lane;
    const float4* p0 = reinterpret_cast<const float4*>(ph.in + 8 * u);
    const float4* p1 = reinterpret_cast<const float4*>(ph.in + ph.in_stride + 8 * u);
    const float4 a0 = __ldcg(p0), a1 = __ldcg(p0 + 1), b0 = __ldcg(p1), b1 = __ldcg(p1 + 1);
    const float v[8] = {a0.x + b0.x, a0.y + b0.y, a0.z + b0.z, a0.w + b0.w,
                        a1.x + b1.x, a1.y + b1.y, a1.z + b1.z, a1.w + b1.w};
    gm::store_converted<4, 1>(v, u, true, bvec, info);
  }
}

// The block's rows of a matrix (share [first, last) of its units) from the `warps` consumer warps'
// partial sums ([warp][m-tile][row]), summed in a fixed order; a row of an m-tile split between
// two blocks is written as part 0 (the block holding its first unit) or part 1.
__device__ __forceinline__ void write_rows(const Phase& ph, int64_t first, int64_t last, const float* partial,
                                           int warps, int ctid) {
  const int first_m = static_cast<int>(first / ph.k_tiles);
  const int n_m = last > first ? static_cast<int>((last - 1) / ph.k_tiles) - first_m + 1 : 0;
  for (int i = ctid; i < n_m * 16; i += 32 * warps) {
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += partial[(w * kMaxBlockMTiles + i / 16) * 16 + i % 16];
    const int64_t m = first_m + i / 16;
    const int part = m * ph.k_tiles >= first ? 0 : 1;
    ph.out[part * ph.out_stride + m * 16 + i % 16] = sum;
  }
}

// A consumer warp's part of one matrix (the block's share sh of its units): its unit of each ring
// stage, from the kernel's stage s on (s advances past them), times x, with the warp's partial rows
// written to partial ([warp][m-tile][row]). A stage holds one unit for each of `warps` consumers.
__device__ __forceinline__ void consume_share(const Phase& ph, Share sh, int warps, const uint8_t* ring,
                                              uint64_t* full, uint64_t* empty, int stages, unsigned& s,
                                              const uint4* bvec, const float4* info, const uint4* zeros,
                                              float* partial, int cw, int lane) {
  const int g = lane / 4, c = lane % 4;
  const bool b_active = (g / 2) == c;  // as in gemv_tc.cu
  const int b_lane = c * 2 + g % 2;
  const int first_m = static_cast<int>(sh.first / ph.k_tiles);
  float acc[2] = {0.0f, 0.0f};
  int m_cur = -1;
  auto flush = [&] {  // the warp's sums of rows g and g+8 of m-tile m_cur
    if (m_cur < 0) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float r = row_sum(acc[h]);
      if (c == 0) partial[(cw * kMaxBlockMTiles + (m_cur - first_m)) * 16 + g + 8 * h] = r;
    }
    acc[0] = acc[1] = 0.0f;
  };
  for (int64_t u = sh.first; u < sh.last; u += warps, ++s) {
    const unsigned slot = s % stages;
    barrier_wait(&full[slot], (s / stages) & 1);
    const int64_t mine = u + cw;
    if (mine < sh.last) {
      const int m = static_cast<int>(mine / ph.k_tiles), t = static_cast<int>(mine % ph.k_tiles);
      if (m != m_cur) flush(), m_cur = m;
      unit_dot(ring + slot * warps * kUnitBytes + cw * kUnitBytes, b_active ? bvec + t * G::kTileVecs + b_lane : zeros,
               info[t * 4 + c], lane, acc);
    }
    __syncwarp();
    if (lane == 0) barrier_arrive(&empty[slot]);
  }
  flush();
}

__global__ void __launch_bounds__(kThreads, 1)
    stream_chain_kernel(const Phase* __restrict__ phases, int n_phases, unsigned* done, int stages, int flags) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  uint4* zeros = reinterpret_cast<uint4*>(ring + stages * kStageBytes);
  uint4* bvec = zeros + G::kTileVecs;
  float* partial = reinterpret_cast<float*>(bvec + kMaxTiles * (G::kTileVecs + 4));  // [warp][m-tile][row]
  uint64_t* full = reinterpret_cast<uint64_t*>(partial + kConsumerWarps * kMaxBlockMTiles * 16);
  uint64_t* empty = full + stages;

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  init_ring(full, empty, stages, kConsumerWarps, zeros);
  __syncthreads();

  // Stage s of the kernel sits in slot s % stages; its barriers' phase is (s / stages) & 1.
  if (warp == 0) {
    if (lane != 0) return;
    const uint64_t policy = evict_first_policy();
    unsigned s = 0;
    for (int p = 0; p < n_phases; ++p) {
      const Phase& ph = phases[p];
      if (ph.kind != kMatmul) continue;
      const Share sh = share(static_cast<int64_t>(ph.m_tiles) * ph.k_tiles);
      for (int64_t u = sh.first; u < sh.last; u += kStageUnits, ++s) {
        const unsigned n = static_cast<unsigned>(sh.last - u < kStageUnits ? sh.last - u : kStageUnits);
        fill_stage(ring, full, empty, s, stages, ph.units + u * kUnitBytes, n, flags & kEvictFirst, policy);
      }
    }
    return;
  }

  const int cw = warp - 1, ctid = static_cast<int>(threadIdx.x) - 32;
  const bool bare = flags & kBare;
  unsigned s = 0;
  for (int p = 0; p < n_phases; ++p) {
    const Phase ph = phases[p];
    if (bare && ph.kind != kMatmul) continue;
    if (p > 0 && !(flags & kNoWaits)) {
      if (ctid == 0)
        while (load_acquire(&done[p - 1]) < gridDim.x) {
        }
      consumers_sync();
    }
    if (ph.kind == kConvert) {  // each block converts its share of the tiles, a warp per tile
      const Share sh = share(ph.k_tiles);
      convert_gate_up(ph, sh.first + cw, sh.last, kConsumerWarps, lane);
    } else {
      float4* info = reinterpret_cast<float4*>(bvec + ph.k_tiles * G::kTileVecs);
      if (!bare) {
        load_x(ph, cw, kConsumerWarps, lane, bvec, info);
        for (int i = ctid; i < kConsumerWarps * kMaxBlockMTiles * 16; i += 32 * kConsumerWarps) partial[i] = 0.0f;
        consumers_sync();
      }

      const Share sh = share(static_cast<int64_t>(ph.m_tiles) * ph.k_tiles);
      consume_share(ph, sh, kConsumerWarps, ring, full, empty, stages, s, bvec, info, zeros, partial, cw, lane);
      if (bare) continue;
      consumers_sync();
      write_rows(ph, sh.first, sh.last, partial, kConsumerWarps, ctid);
    }
    consumers_sync();
    if (ctid == 0) {
      __threadfence();
      atomicAdd(&done[p], 1u);
    }
  }
}

// ---- The launched form ----
// The chain above pays about 2.3 µs a dependency on its counters; the launches of bench_cuda_chain
// pay about as much at each matmul's ramp and tail, because their blocks fill the SM's registers, so
// a matmul's blocks become resident only as the previous one's leave. Here each matrix is ONE
// LAUNCH of a ring kernel small enough that two fit an SM (kLaunchConsumers consumer warps and a
// producer, at most 113 registers, 82 KB of shared memory at K = 4096 and 117 KB at 12288, so that
// any two but a pair of down projections fit): released on entry (griddepcontrol.launch_dependents
// first), the next matrix's block sits beside this one from the start and fills its ring while this
// one streams, and its consumers wait on the hardware's dependency (griddepcontrol.wait), which the
// ninth session measured at about 1 µs a kernel under streaming load, instead of a counter.
// The SiLU(gate) ⊙ up conversion is a launch of its own, as in the decode step.
constexpr int kLaunchConsumers = 8;
constexpr int kLaunchThreads = 32 * (kLaunchConsumers + 1);
constexpr int kLaunchStageBytes = kLaunchConsumers * kUnitBytes;  // one unit per consumer warp

// kPrefetchMask: the stages past the ring prefetched into L2, in units of kPrefetchUnit.
// kReleaseAfterIssue: released by the producer once it has issued its last copy, so that the next
// matrix's blocks fill their rings only during this one's tail and dependency, when memory would
// otherwise idle. kSmGate: released on entry, but the producer issues its first copy only once the
// previous matrix's producer on the same SM has issued its last (a flag per SM, see SmGate).
enum LaunchFlags : int {
  kReleaseAfterWait = 8,
  kPrefetchUnit = 16,
  kPrefetchMask = 16 * 63,
  kReleaseAfterIssue = 1024,
  kSmGate = 2048
};

// The per-SM flags of kSmGate: slot[smid] holds the highest `post` of a producer on that SM that has
// issued its last copy, and issued[p] counts the producers of phase p that have. A producer starts
// once its SM's slot reaches `wait_for` (the previous matrix's post) or every producer of the
// previous matrix has issued its last copy (no block of it may have run on this SM); the latter is
// counted in `fallbacks`. It cannot deadlock: a launch released on entry starts only once every
// block of the one before it runs.
struct SmGate {
  unsigned* slot;
  unsigned* fallbacks;
  unsigned* issued;  // per phase
  unsigned wait_for, post;
};
constexpr int kGateSlots = 1024;

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ void launch_consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(32 * kLaunchConsumers) : "memory");
}

size_t launched_shared_bytes(const Phase& ph, int stages) {
  if (ph.kind == kConvert) return 0;
  return static_cast<size_t>(stages) * kLaunchStageBytes + G::kTileVecs * 16 +
         static_cast<size_t>(ph.k_tiles) * (G::kTileVecs + 4) * 16 + kLaunchConsumers * kMaxBlockMTiles * 16 * 4 +
         2 * static_cast<size_t>(stages) * 8;
}

// The ring stages a launch of ph gets when `want` are asked for: fewer where two blocks would not fit
// an SM (the down projection keeps 3, its neighbours need little).
int launched_stages(const Phase& ph, int want) {
  int s = want;
  while (s > 3 && launched_shared_bytes(ph, s) > 113 * 1024) --s;
  return s;
}

__global__ void __launch_bounds__(kLaunchThreads, 2)
    launched_kernel(const Phase ph, int stages, int flags, const SmGate gate) {
  if (!(flags & (kReleaseAfterWait | kReleaseAfterIssue))) asm volatile("griddepcontrol.launch_dependents;");
  auto wait_inputs = [&] {
    if (!(flags & kNoWaits)) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (flags & kReleaseAfterWait) asm volatile("griddepcontrol.launch_dependents;");
  };
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (ph.kind == kConvert) {  // each block converts its share of the tiles, a warp per tile
    if (flags & kReleaseAfterIssue) asm volatile("griddepcontrol.launch_dependents;");  // it streams nothing
    wait_inputs();
    const Share sh = share(ph.k_tiles);
    convert_gate_up(ph, sh.first + warp, sh.last, kLaunchThreads / 32, lane);
    return;
  }

  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  uint4* zeros = reinterpret_cast<uint4*>(ring + stages * kLaunchStageBytes);
  uint4* bvec = zeros + G::kTileVecs;
  float4* info = reinterpret_cast<float4*>(bvec + ph.k_tiles * G::kTileVecs);
  float* partial = reinterpret_cast<float*>(info + ph.k_tiles * 4);  // [warp][m-tile][row]
  uint64_t* full = reinterpret_cast<uint64_t*>(partial + kLaunchConsumers * kMaxBlockMTiles * 16);
  uint64_t* empty = full + stages;
  init_ring(full, empty, stages, kLaunchConsumers, zeros);
  __syncthreads();

  const Share sh = share(static_cast<int64_t>(ph.m_tiles) * ph.k_tiles);
  if (warp == 0) {  // the producer: weights never depend on the kernels before
    if (lane != 0) return;
    // With stages to prefetch in flags (kPrefetchMask), the producer also asks L2 for that many
    // stages past its ring as they come into reach, so that memory stays busy while the consumers
    // wait.
    const int64_t ahead = static_cast<int64_t>(flags & kPrefetchMask) / kPrefetchUnit * kLaunchConsumers;
    int64_t prefetched = sh.first + static_cast<int64_t>(stages) * kLaunchConsumers;
    const unsigned smid = sm_id();
    if (flags & kSmGate && gate.wait_for > 0) {
      while (load_acquire(gate.slot + smid) < gate.wait_for) {
        if (load_acquire(gate.issued + gate.wait_for - 1) == gridDim.x) {
          atomicAdd(gate.fallbacks, 1u);
          break;
        }
      }
    }
    unsigned s = 0;
    for (int64_t u = sh.first; u < sh.last; u += kLaunchConsumers, ++s) {
      for (; prefetched < sh.last && prefetched < u + static_cast<int64_t>(stages) * kLaunchConsumers + ahead;
           prefetched += kLaunchConsumers) {
        const int64_t n = sh.last - prefetched < kLaunchConsumers ? sh.last - prefetched : kLaunchConsumers;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ph.units + prefetched * kUnitBytes),
                     "r"(static_cast<unsigned>(n * kUnitBytes))
                     : "memory");
      }
      const unsigned n = static_cast<unsigned>(sh.last - u < kLaunchConsumers ? sh.last - u : kLaunchConsumers);
      fill_stage(ring, full, empty, s, stages, ph.units + u * kUnitBytes, n, false, 0, kLaunchConsumers);
    }
    if (flags & kReleaseAfterIssue) asm volatile("griddepcontrol.launch_dependents;");
    if (flags & kSmGate) atomicMax(gate.slot + smid, gate.post), atomicAdd(gate.issued + gate.post - 1, 1u);
    return;
  }

  const int cw = warp - 1, ctid = static_cast<int>(threadIdx.x) - 32;
  wait_inputs();
  load_x(ph, cw, kLaunchConsumers, lane, bvec, info);
  for (int i = ctid; i < kLaunchConsumers * kMaxBlockMTiles * 16; i += 32 * kLaunchConsumers) partial[i] = 0.0f;
  launch_consumers_sync();

  unsigned s = 0;
  consume_share(ph, sh, kLaunchConsumers, ring, full, empty, stages, s, bvec, info, zeros, partial, cw, lane);
  launch_consumers_sync();
  write_rows(ph, sh.first, sh.last, partial, kLaunchConsumers, ctid);
}

// ---- The dataflow form ----
// The chain above waits, at every matrix, for every block to finish the previous one, and only then
// reads and converts x: about 4 µs a matrix. Here each matrix's rows are done in W waves (every
// block takes an equal share of each wave's units, wave after wave), so its outputs complete in W
// steps over the matrix's time; and a block consumes its share of a wave chunk by chunk over K, the
// chunk c of K being exactly the rows of the previous matrix's wave c. A block thus needs the
// previous matrix's last wave only (W-1)/W of the way through its first wave's share.
// - Units are laid out in consumption order: matrix, wave, block, then within the block chunk-major
//   (chunk, m-tile, k-tile). locate() gives the (m-tile, k-tile) of a block's i-th unit.
// - kXWarps warps read and convert x, chunk by chunk as soon as each is complete (a counter per
//   matrix and wave), into one of two buffers, a matrix ahead of the consumers.
// - kReduceWarps warps take each wave's partial sums (two buffers, handed over with named
//   barriers), write the rows and signal the wave's counter, so the consumers never stop at a wave's
//   end.
// - A row of an m-tile split between blocks is written as one part per block (part 0 by the block
//   holding the m-tile's first unit); readers add as many parts as the writing matrix has.
// - The gate/up matrix's rows are interleaved per wave (gate then up rows of the same inputs), so
//   SiLU(gate) ⊙ up of chunk c needs gate/up's wave c only; every block forms it for itself.
// - A ring stage holds units of one wave only, so a wave share that is not a multiple of 16 units
//   leaves consumer warps idle in its last stage (at W = 4 the out projection's shares are 7-8).
constexpr int kXWarps = 6;
constexpr int kReduceWarps = 2;
constexpr int kFlowThreads = 32 * (1 + kConsumerWarps + kXWarps + kReduceWarps);
constexpr int kPartialFloats = kConsumerWarps * kMaxBlockMTiles * 16;  // one wave's partial sums
constexpr int kMaxParts = 4;
constexpr int kMaxWaves = 4;

enum Input : int { kSum = 0, kSiluGateUp = 1 };
struct FlowPhase {
  const uint8_t* units;  // consumption order
  int m_tiles, k_tiles;
  const float* in;  // in_parts parts of in_stride values; kSiluGateUp: gate/up's outputs
  int64_t in_stride;
  int in_parts;  // at most kMaxParts: the most blocks sharing an m-tile of the matrix that wrote in
  int input;
  float* out;  // kMaxParts parts of out_stride values
  int64_t out_stride;
};

struct Loc {
  int m, t;  // m-tile within the wave, k-tile
};
// The i-th unit of the range [first, last) of a wave's units (m-major: m·kt + t) in chunk-major order.
__host__ __device__ inline Loc locate(int64_t first, int64_t last, int kt, int chunks, int64_t i) {
  const int n = kt / chunks;
  const int m_first = static_cast<int>(first / kt), t_first = static_cast<int>(first % kt);
  const int m_last = static_cast<int>((last - 1) / kt), t_end = static_cast<int>((last - 1) % kt) + 1;
  const bool one = m_first == m_last;
  const int n_mid = one ? 0 : m_last - m_first - 1;
  for (int c = 0; c < chunks; ++c) {
    const int lo = c * n, hi = lo + n;
    const int a_lo = t_first > lo ? t_first : lo;
    const int a_hi = one ? (t_end < hi ? t_end : hi) : hi;
    const int a = a_hi > a_lo ? a_hi - a_lo : 0;
    const int b = one ? 0 : ((t_end < hi ? t_end : hi) - lo > 0 ? (t_end < hi ? t_end : hi) - lo : 0);
    if (i < a) return {m_first, a_lo + static_cast<int>(i)};
    i -= a;
    if (i < static_cast<int64_t>(n_mid) * n) return {m_first + 1 + static_cast<int>(i / n), lo + static_cast<int>(i % n)};
    i -= static_cast<int64_t>(n_mid) * n;
    if (i < b) return {m_last, lo + static_cast<int>(i)};
    i -= b;
  }
  return {-1, -1};
}

__host__ __device__ inline int64_t share_first(int64_t n, int b, int blocks) { return n * b / blocks; }
// The block whose share of n items holds item x.
__host__ __device__ inline int owner(int64_t x, int64_t n, int blocks) {
  int b = static_cast<int>(x * blocks / n);
  while (b > 0 && share_first(n, b, blocks) > x) --b;
  while (b + 1 < blocks && share_first(n, b + 1, blocks) <= x) ++b;
  return b;
}
__host__ __device__ inline int wave_m0(int m_tiles, int w, int waves) { return m_tiles * w / waves; }

__device__ __forceinline__ unsigned load_acquire_shared(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(shared_addr(p)) : "memory");
  return v;
}
__device__ __forceinline__ void store_release_shared(unsigned* p, unsigned v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(shared_addr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void xwarps_sync() {
  asm volatile("bar.sync 2, %0;" ::"n"(32 * kXWarps) : "memory");
}
__device__ __forceinline__ void reducers_sync() {
  asm volatile("bar.sync 3, %0;" ::"n"(32 * kReduceWarps) : "memory");
}
// Named barriers 4 + b ("partials of buffer b written") and 6 + b ("buffer b free again"), between
// the consumers and the reduce warps.
constexpr int kHandOff = 32 * (kConsumerWarps + kReduceWarps);
__device__ __forceinline__ void named_arrive(int id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "n"(kHandOff) : "memory");
}
__device__ __forceinline__ void named_sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kHandOff) : "memory");
}

// done[p * kMaxWaves + w]: blocks done with wave w of phase p. buf_tiles: the two x buffers' sizes.
__global__ void __launch_bounds__(kFlowThreads, 1)
    dataflow_kernel(const FlowPhase* __restrict__ phases, int n_phases, int waves, unsigned* done, int stages,
                    int flags, int buf0_tiles) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  uint4* zeros = reinterpret_cast<uint4*>(ring + stages * kStageBytes);
  uint4* bufs = zeros + G::kTileVecs;  // buffer 0 (buf0_tiles), then buffer 1 (kMaxTiles)
  float* partials = reinterpret_cast<float*>(bufs + (buf0_tiles + kMaxTiles) * (G::kTileVecs + 4));  // two waves'
  uint64_t* full = reinterpret_cast<uint64_t*>(partials + 2 * kPartialFloats);
  uint64_t* empty = full + stages;
  unsigned* x_progress = reinterpret_cast<unsigned*>(empty + stages);  // chunks converted: p·waves + c + 1
  unsigned* c_done = x_progress + 1;                                  // phases the consumers finished

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  init_ring(full, empty, stages, kConsumerWarps, zeros);
  if (threadIdx.x == 0) *x_progress = 0, *c_done = 0;
  for (int i = static_cast<int>(threadIdx.x); i < 2 * kPartialFloats; i += blockDim.x) partials[i] = 0.0f;
  __syncthreads();
  const int blocks = static_cast<int>(gridDim.x), me = static_cast<int>(blockIdx.x);
  auto buffer = [&](int p) { return p % 2 == 0 ? bufs : bufs + buf0_tiles * (G::kTileVecs + 4); };
  auto buffer_tiles = [&](int p) { return p % 2 == 0 ? buf0_tiles : kMaxTiles; };

  if (warp == 0) {  // the producer: the block's units, phase after phase, wave after wave
    if (lane != 0) return;
    const uint64_t policy = evict_first_policy();
    unsigned s = 0;
    for (int p = 0; p < n_phases; ++p) {
      const FlowPhase& ph = phases[p];
      for (int w = 0; w < waves; ++w) {
        const int m0 = wave_m0(ph.m_tiles, w, waves);
        const int64_t units = static_cast<int64_t>(wave_m0(ph.m_tiles, w + 1, waves) - m0) * ph.k_tiles;
        const int64_t first = share_first(units, me, blocks), last = share_first(units, me + 1, blocks);
        const uint8_t* base = ph.units + (static_cast<int64_t>(m0) * ph.k_tiles + first) * kUnitBytes;
        for (int64_t u = first; u < last; u += kStageUnits, ++s) {
          const unsigned n = static_cast<unsigned>(last - u < kStageUnits ? last - u : kStageUnits);
          fill_stage(ring, full, empty, s, stages, base + (u - first) * kUnitBytes, n, flags & kEvictFirst, policy);
        }
      }
    }
    return;
  }

  const int total_waves = n_phases * waves;
  if (warp > kConsumerWarps + kXWarps) {  // the reduce warps: each wave's rows summed, written, signalled
    const int rtid = static_cast<int>(threadIdx.x) - 32 * (1 + kConsumerWarps + kXWarps);
    int ws = 0;
    for (int p = 0; p < n_phases; ++p) {
      const FlowPhase ph = phases[p];
      for (int w = 0; w < waves; ++w, ++ws) {
        const int b = ws % 2;
        float* partial = partials + b * kPartialFloats;
        const int m0 = wave_m0(ph.m_tiles, w, waves);
        const int64_t units = static_cast<int64_t>(wave_m0(ph.m_tiles, w + 1, waves) - m0) * ph.k_tiles;
        const int64_t first = share_first(units, me, blocks), last = share_first(units, me + 1, blocks);
        const int first_m = static_cast<int>(first / ph.k_tiles);
        named_sync(4 + b);
        const int n_m = last > first ? static_cast<int>((last - 1) / ph.k_tiles) - first_m + 1 : 0;
        for (int i = rtid; i < n_m * 16; i += 32 * kReduceWarps) {
          float sum = 0.0f;
          for (int q = 0; q < kConsumerWarps; ++q) {
            float& slot_sum = partial[(q * kMaxBlockMTiles + i / 16) * 16 + i % 16];
            sum += slot_sum;
            slot_sum = 0.0f;
          }
          const int m = first_m + i / 16;
          const int part = me - owner(static_cast<int64_t>(m) * ph.k_tiles, units, blocks);
          ph.out[part * ph.out_stride + static_cast<int64_t>(m0 + m) * 16 + i % 16] = sum;
        }
        reducers_sync();
        if (rtid == 0) {
          __threadfence();
          atomicAdd(&done[p * kMaxWaves + w], 1u);
          if (w == waves - 1) store_release_shared(c_done, static_cast<unsigned>(p + 1));
        }
        if (ws + 2 < total_waves) named_arrive(6 + b);
      }
    }
    return;
  }

  if (warp > kConsumerWarps) {  // the x warps: each chunk of x as soon as its rows are complete
    const int xw = warp - 1 - kConsumerWarps;
    for (int p = 0; p < n_phases; ++p) {
      const FlowPhase ph = phases[p];
      if (p >= 2) {  // the buffer's previous phase must be consumed
        if (lane == 0)
          while (load_acquire_shared(c_done) < static_cast<unsigned>(p - 1)) {
          }
        __syncwarp();
      }
      uint4* bvec = buffer(p);
      float4* info = reinterpret_cast<float4*>(bvec + buffer_tiles(p) * G::kTileVecs);
      const int n = ph.k_tiles / waves;
      for (int c = 0; c < waves; ++c) {
        if (p > 0 && !(flags & kNoWaits)) {
          if (lane == 0)
            while (load_acquire(&done[(p - 1) * kMaxWaves + c]) < static_cast<unsigned>(blocks)) {
            }
          __syncwarp();
        }
        for (int t = c * n + xw; t < (c + 1) * n; t += kXWarps) {
          const int64_t u = static_cast<int64_t>(t) * 32 + lane;
          float v[8];
          if (ph.input == kSum) {
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
#pragma unroll
            for (int q = 0; q < kMaxParts; ++q) {
              if (q >= ph.in_parts) break;
              const float4* src = reinterpret_cast<const float4*>(ph.in + q * ph.in_stride + 8 * u);
              const float4 x0 = __ldcg(src), x1 = __ldcg(src + 1);
              a.x += x0.x, a.y += x0.y, a.z += x0.z, a.w += x0.w, b.x += x1.x, b.y += x1.y, b.z += x1.z, b.w += x1.w;
            }
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
          } else {  // gate/up's wave c holds the gate rows then the up rows of inputs [c·E, (c+1)·E)
            const int64_t e = static_cast<int64_t>(ph.k_tiles) * G::kTileK / waves, k = 8 * u;
            const int64_t gate_row = (k / e) * 2 * e + k % e, up_row = gate_row + e;
            float gt[8] = {}, up[8] = {};
#pragma unroll
            for (int q = 0; q < kMaxParts; ++q)
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                if (q >= ph.in_parts) break;
                const float4 a = __ldcg(reinterpret_cast<const float4*>(ph.in + q * ph.in_stride + gate_row) + half);
                const float4 b = __ldcg(reinterpret_cast<const float4*>(ph.in + q * ph.in_stride + up_row) + half);
                gt[4 * half] += a.x, gt[4 * half + 1] += a.y, gt[4 * half + 2] += a.z, gt[4 * half + 3] += a.w;
                up[4 * half] += b.x, up[4 * half + 1] += b.y, up[4 * half + 2] += b.z, up[4 * half + 3] += b.w;
              }
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = gt[i] / (1.0f + expf(-gt[i])) * up[i];
          }
          gm::store_converted<4, 1>(v, u, true, bvec, info);
        }
        xwarps_sync();
        if (xw == 0 && lane == 0) store_release_shared(x_progress, static_cast<unsigned>(p * waves + c + 1));
      }
    }
    return;
  }

  const int cw = warp - 1;
  const int g = lane / 4, c4 = lane % 4;
  const bool b_active = (g / 2) == c4;
  const int b_lane = c4 * 2 + g % 2;
  unsigned s = 0, x_seen = 0;
  int ws = 0;
  for (int p = 0; p < n_phases; ++p) {
    const FlowPhase ph = phases[p];
    const uint4* bvec = buffer(p);
    const float4* info = reinterpret_cast<const float4*>(bvec + buffer_tiles(p) * G::kTileVecs);
    const int n = ph.k_tiles / waves;
    for (int w = 0; w < waves; ++w, ++ws) {
      const int m0 = wave_m0(ph.m_tiles, w, waves);
      const int64_t units = static_cast<int64_t>(wave_m0(ph.m_tiles, w + 1, waves) - m0) * ph.k_tiles;
      const int64_t first = share_first(units, me, blocks), last = share_first(units, me + 1, blocks);
      const int first_m = static_cast<int>(first / ph.k_tiles);
      const int b = ws % 2;
      float* partial = partials + b * kPartialFloats;
      if (ws >= 2) named_sync(6 + b);  // the reduce warps are done with this buffer's wave ws - 2
      float acc[2] = {0.0f, 0.0f};
      int m_cur = -1;
      auto flush = [&] {
        if (m_cur < 0) return;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float r = row_sum(acc[h]);
          if (c4 == 0) partial[(cw * kMaxBlockMTiles + (m_cur - first_m)) * 16 + g + 8 * h] += r;
        }
        acc[0] = acc[1] = 0.0f;
      };
      for (int64_t u = first; u < last; u += kStageUnits, ++s) {
        const unsigned slot = s % stages;
        barrier_wait(&full[slot], (s / stages) & 1);
        if (u + cw < last) {
          const Loc loc = locate(first, last, ph.k_tiles, waves, u - first + cw);
          const unsigned need = static_cast<unsigned>(p * waves + loc.t / n + 1);
          if (need > x_seen) {
            unsigned v = load_acquire_shared(x_progress);
            while (v < need) v = load_acquire_shared(x_progress);
            x_seen = v;
          }
          if (loc.m != m_cur) flush(), m_cur = loc.m;
          unit_dot(ring + slot * kStageBytes + cw * kUnitBytes,
                   b_active ? bvec + loc.t * G::kTileVecs + b_lane : zeros, info[loc.t * 4 + c4], lane, acc);
        }
        __syncwarp();
        if (lane == 0) barrier_arrive(&empty[slot]);
      }
      flush();
      named_arrive(4 + b);  // the reduce warps take the wave's rows from here
    }
  }
}

// Random codes; BF16 scales in [1e-3, 3e-3) and biases in [-0.01, 0.01).
__global__ void fill_units(uint8_t* w, int64_t units, uint32_t seed) {
  const int64_t words = units * (kUnitBytes / 4);
  for (int64_t i = blockIdx.x * 256LL + threadIdx.x; i < words; i += 256LL * gridDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13, x *= 3266489917u, x ^= x >> 16;
    const int off = static_cast<int>((i * 4) % kUnitBytes);
    uint32_t v = x;
    if (off >= kCodeBytes) {
      const bool bias = (off - kCodeBytes) % 8 >= 4;
      auto bf16 = [&](uint32_t r) {
        const float f = bias ? (static_cast<float>(r & 1023) / 1024.0f - 0.5f) * 0.02f
                             : 1e-3f + static_cast<float>(r & 1023) / 1024.0f * 2e-3f;
        return __float_as_uint(f) >> 16;
      };
      v = bf16(x) | (bf16(x >> 10) << 16);
    }
    reinterpret_cast<uint32_t*>(w)[i] = v;
  }
}

// Reads every byte of the matrices once with 16-byte loads.
__global__ void __launch_bounds__(256) read_all(const uint8_t* const* mats, const int64_t* sizes, int n, uint4* sink) {
  uint4 a = make_uint4(0u, 0u, 0u, 0u);
  for (int m = 0; m < n; ++m) {
    const uint4* p = reinterpret_cast<const uint4*>(mats[m]);
    for (int64_t i = blockIdx.x * 256LL + threadIdx.x; i < sizes[m] / 16; i += 256LL * gridDim.x) {
      uint4 x;
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
                   : "l"(p + i));
      a.x ^= x.x, a.y ^= x.y, a.z ^= x.z, a.w ^= x.w;
    }
  }
  if ((a.x ^ a.y ^ a.z ^ a.w) == 0x12345678u) sink[0] = a;  // keeps the loads
}

float bf16_to_float(uint32_t bits) {
  const uint32_t u = bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The rows of a repacked matrix times x, in double.
std::vector<double> reference(const std::vector<uint8_t>& w, int m_tiles, int k_tiles, const std::vector<float>& x) {
  std::vector<double> y(static_cast<size_t>(m_tiles) * 16, 0.0);
  for (int m = 0; m < m_tiles; ++m)
    for (int t = 0; t < k_tiles; ++t) {
      const uint8_t* unit = w.data() + (static_cast<size_t>(m) * k_tiles + t) * kUnitBytes;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, c = lane % 4;
        uint32_t meta[2];
        std::memcpy(meta, unit + kCodeBytes + lane * 8, 8);
        for (int h = 0; h < 2; ++h) {
          const double scale = bf16_to_float(h == 0 ? meta[0] & 0xFFFF : meta[0] >> 16);
          const double bias = bf16_to_float(h == 0 ? meta[1] & 0xFFFF : meta[1] >> 16);
          double acc = 0;
          for (int half = 0; half < 2; ++half) {
            const uint8_t* q = unit + ((h * 2 + half) * 32 + lane) * 16;
            for (int i = 0; i < 32; ++i) {
              const int code = (q[i / 2] >> (4 * (i % 2))) & 15;
              acc += (scale * code + bias) * x[t * G::kTileK + c * 64 + half * 32 + i];
            }
          }
          y[static_cast<size_t>(m) * 16 + g + 8 * h] += acc;
        }
      }
    }
  return y;
}

template <typename T>
T* device_alloc(size_t count) {
  void* p = nullptr;
  STRATA_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  STRATA_CUDA_CHECK(cudaMemset(p, 0, count * sizeof(T)));
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> download(const T* p, size_t count) {
  std::vector<T> v(count);
  STRATA_CUDA_CHECK(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

size_t shared_bytes(int stages) {
  return static_cast<size_t>(stages) * kStageBytes + G::kTileVecs * 16 + kMaxTiles * (G::kTileVecs + 4) * 16 +
         kConsumerWarps * kMaxBlockMTiles * 16 * 4 + 2 * static_cast<size_t>(stages) * 8;
}

size_t flow_shared_bytes(int stages, int buf0_tiles) {
  return static_cast<size_t>(stages) * kStageBytes + G::kTileVecs * 16 +
         static_cast<size_t>(buf0_tiles + kMaxTiles) * (G::kTileVecs + 4) * 16 +
         2 * kPartialFloats * 4 + 2 * static_cast<size_t>(stages) * 8 + 8;
}

// The dataflow form over the chain's matrices (its kConvert phases dropped: the down projection's x
// warps form SiLU(gate) ⊙ up themselves): checked for each wave count, then timed.
template <typename TimedGraph>
bool dataflow(int sms, cudaStream_t st, TimedGraph& timed_graph, float* h, float* proj, float* o, float* gu,
              const std::vector<Phase>& chain) {
  constexpr int64_t kHidden = 4096, kProj = 12352, kGateUp = 24576;
  // An attention layer's input projections write a buffer of their own, so that no part of a
  // row is left over from a GDN layer's different split.
  float* proj_attn = device_alloc<float>(kMaxParts * kProj);
  std::vector<FlowPhase> phases;
  for (size_t i = 0; i < chain.size(); ++i) {
    const Phase& c = chain[i];
    if (c.kind != kMatmul) continue;
    const int role = static_cast<int>(phases.size() % 4);  // in_proj, out, gate/up, down
    const bool attn = role == 0 ? c.m_tiles * 16 != kProj : role == 1 && phases.back().out == proj_attn;
    float* in = role == 0 ? h : role == 1 ? (attn ? proj_attn : proj) : role == 2 ? o : gu;
    float* out = role == 0 ? (attn ? proj_attn : proj) : role == 1 ? o : role == 2 ? gu : h;
    const int64_t in_stride = role == 0 ? kHidden : role == 1 ? kProj : role == 2 ? kHidden : kGateUp;
    const int64_t out_stride = role == 0 ? kProj : role == 1 ? kHidden : role == 2 ? kGateUp : kHidden;
    phases.push_back(
        {c.units, c.m_tiles, c.k_tiles, in, in_stride, kMaxParts, role == 3 ? kSiluGateUp : kSum, out, out_stride});
  }
  int buf0_tiles = 0;
  for (size_t p = 0; p < phases.size(); p += 2) buf0_tiles = std::max(buf0_tiles, phases[p].k_tiles);
  // The limits: a wave's share touches at most kMaxBlockMTiles m-tiles, an m-tile at most kMaxParts
  // blocks, and the chunks of K line up with the previous matrix's waves (checked below by the
  // outputs too).
  auto fits = [&](int waves) {
    for (const FlowPhase& ph : phases) {
      if (ph.k_tiles % waves != 0 || ph.m_tiles % waves != 0) return false;
      for (int w = 0; w < waves; ++w) {
        const int64_t units = static_cast<int64_t>(ph.m_tiles / waves) * ph.k_tiles;
        for (int b = 0; b < sms; ++b) {
          const int64_t first = share_first(units, b, sms), last = share_first(units, b + 1, sms);
          if (last <= first) return false;
          if ((last - 1) / ph.k_tiles - first / ph.k_tiles + 1 > kMaxBlockMTiles) return false;
          for (int64_t m = first / ph.k_tiles; m <= (last - 1) / ph.k_tiles; ++m)
            if (b - owner(m * ph.k_tiles, units, sms) >= kMaxParts) return false;
        }
      }
    }
    return true;
  };
  // The parts a matrix's readers add: the most blocks sharing one of its m-tiles.
  auto parts = [&](const FlowPhase& ph, int waves) {
    int most = 1;
    for (int w = 0; w < waves; ++w) {
      const int64_t units = static_cast<int64_t>(ph.m_tiles / waves) * ph.k_tiles;
      for (int b = 0; b < sms; ++b) {
        const int64_t first = share_first(units, b, sms), last = share_first(units, b + 1, sms);
        for (int64_t m = first / ph.k_tiles; m <= (last - 1) / ph.k_tiles; ++m)
          most = std::max(most, b - owner(m * ph.k_tiles, units, sms) + 1);
      }
    }
    return most;
  };
  FlowPhase* d_phases = device_alloc<FlowPhase>(phases.size());
  auto configure = [&](int waves) {
    for (size_t p = 0; p < phases.size(); ++p)
      phases[p].in_parts = parts(phases[p == 0 ? phases.size() - 1 : p - 1], waves);
    STRATA_CUDA_CHECK(
        cudaMemcpy(d_phases, phases.data(), phases.size() * sizeof(FlowPhase), cudaMemcpyHostToDevice));
  };
  unsigned* done = device_alloc<unsigned>(phases.size() * kMaxWaves);
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(dataflow_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(flow_shared_bytes(3, buf0_tiles))));
  auto run = [&](int n, int waves, int stages, int flags) {
    STRATA_CUDA_CHECK(cudaMemsetAsync(done, 0, phases.size() * kMaxWaves * 4, st));
    dataflow_kernel<<<sms, kFlowThreads, flow_shared_bytes(stages, buf0_tiles), st>>>(d_phases, n, waves, done,
                                                                                     stages, flags, buf0_tiles);
    STRATA_CUDA_CHECK(cudaGetLastError());
  };
  auto parts_sum = [](const std::vector<float>& v, int64_t stride, int64_t r) {
    float s = 0.0f;
    for (int q = 0; q < kMaxParts; ++q) s += v[q * stride + r];
    return s;
  };

  std::printf("\nThe dataflow form: each matrix's rows in W waves, K consumed chunk by chunk as the previous "
              "matrix's waves complete, x converted by %d warps of its own a matrix ahead (%d threads a block)\n\n",
              kXWarps, kFlowThreads);
  bool ok = true;
  std::vector<int> wave_counts;
  for (int waves : {1, 2, 4}) {
    if (!fits(waves)) {
      std::printf("W = %d: the matrices do not split into %d waves over %d SMs within this kernel's limits\n",
                  waves, waves, sms);
      continue;
    }
    wave_counts.push_back(waves);
    configure(waves);
    STRATA_CUDA_CHECK(cudaMemset(h, 0, kMaxParts * kHidden * 4));
    STRATA_CUDA_CHECK(cudaMemset(proj, 0, kMaxParts * kProj * 4));
    STRATA_CUDA_CHECK(cudaMemset(o, 0, kMaxParts * kHidden * 4));
    STRATA_CUDA_CHECK(cudaMemset(gu, 0, kMaxParts * kGateUp * 4));
    {
      std::vector<float> x(kHidden);
      for (int64_t i = 0; i < kHidden; ++i) x[i] = 0.01f * static_cast<float>(i % 37) - 0.18f;
      STRATA_CUDA_CHECK(cudaMemcpy(h, x.data(), kHidden * 4, cudaMemcpyHostToDevice));
    }
    for (int n = 1; n <= 4; ++n) {
      const FlowPhase& ph = phases[n - 1];
      run(n - 1, waves, 2, 0);
      STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
      const int64_t k_len = static_cast<int64_t>(ph.k_tiles) * G::kTileK;
      std::vector<float> x(k_len);
      const std::vector<float> in = download(ph.in, static_cast<size_t>(kMaxParts * ph.in_stride));
      if (ph.input == kSiluGateUp) {
        const int64_t e = k_len / waves;
        for (int64_t k = 0; k < k_len; ++k) {
          const int64_t gate_row = (k / e) * 2 * e + k % e;
          const float gate = parts_sum(in, ph.in_stride, gate_row), up = parts_sum(in, ph.in_stride, gate_row + e);
          x[k] = gate / (1.0f + std::exp(-gate)) * up;
        }
      } else {
        for (int64_t k = 0; k < k_len; ++k) x[k] = parts_sum(in, ph.in_stride, k);
      }
      run(n, waves, 2, 0);
      STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
      // The units back in (m-tile, k-tile) order for the reference.
      const int64_t total = static_cast<int64_t>(ph.m_tiles) * ph.k_tiles;
      const std::vector<uint8_t> laid = download(ph.units, static_cast<size_t>(total * kUnitBytes));
      std::vector<uint8_t> natural(laid.size());
      std::vector<char> seen(total, 0);
      for (int w = 0; w < waves; ++w) {
        const int m0 = wave_m0(ph.m_tiles, w, waves);
        const int64_t units = static_cast<int64_t>(wave_m0(ph.m_tiles, w + 1, waves) - m0) * ph.k_tiles;
        for (int b = 0; b < sms; ++b) {
          const int64_t first = share_first(units, b, sms), last = share_first(units, b + 1, sms);
          for (int64_t i = 0; i < last - first; ++i) {
            const Loc loc = locate(first, last, ph.k_tiles, waves, i);
            const int64_t nat = static_cast<int64_t>(m0 + loc.m) * ph.k_tiles + loc.t;
            seen[nat] += 1;
            std::memcpy(natural.data() + nat * kUnitBytes,
                        laid.data() + (static_cast<int64_t>(m0) * ph.k_tiles + first + i) * kUnitBytes, kUnitBytes);
          }
        }
      }
      if (std::count(seen.begin(), seen.end(), 1) != total) {
        std::printf("check: W = %d, matrix %d: the layout does not cover every unit once\n", waves, n - 1);
        ok = false;
        continue;
      }
      const std::vector<float> y = download(ph.out, static_cast<size_t>(kMaxParts * ph.out_stride));
      const std::vector<double> ref = reference(natural, ph.m_tiles, ph.k_tiles, x);
      double worst = 0, largest = 0;
      for (size_t r = 0; r < ref.size(); ++r) {
        largest = std::max(largest, std::fabs(ref[r]));
        worst = std::max(worst, std::fabs(static_cast<double>(parts_sum(y, ph.out_stride, static_cast<int64_t>(r))) - ref[r]));
      }
      std::printf("check: W = %d, matrix %d (%zu rows, K %lld, input in %d parts): max |error| %.3g, max |y| %.3g\n",
                  waves, n - 1, ref.size(), static_cast<long long>(k_len), ph.in_parts, worst, largest);
      if (!(worst <= 1e-4 * largest)) ok = false;
    }
  }
  if (!ok) {
    std::printf("check FAILED\n");
    return false;
  }
  std::printf("\n| variant (mean of 20) | ring stages | ms | GB/s | %% of peak |\n|---|---|---|---|---|\n");
  for (int waves : wave_counts)
    for (int flags : {static_cast<int>(kNoWaits | kEvictFirst), static_cast<int>(kEvictFirst)})
      for (int stages : {2, 3}) {
        configure(waves);
        const std::string name = "dataflow, W = " + std::to_string(waves) +
                                 (flags & kNoWaits ? ", timing only: no waits" : ", every dependency waited for");
        timed_graph(name, stages, [&] { run(static_cast<int>(phases.size()), waves, stages, flags); });
      }
  return true;
}

}  // namespace

int main(int, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("%s: bulk copies need compute capability 9.0 or above\n", prop.name);
    return 0;
  }
  const int sms = prop.multiProcessorCount;
  cudaStream_t st;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  // Activations: two parts per value. h feeds the input projections; proj, o and gu are outputs.
  constexpr int64_t kHidden = 4096, kProj = 12352, kGateUp = 24576;
  // kMaxParts parts are allocated for the dataflow form; the chain uses the first two.
  float* h = device_alloc<float>(kMaxParts * kHidden);
  float* proj = device_alloc<float>(kMaxParts * kProj);
  float* o = device_alloc<float>(kMaxParts * kHidden);
  float* gu = device_alloc<float>(kMaxParts * kGateUp);
  uint4* converted = device_alloc<uint4>(kMaxTiles * (G::kTileVecs + 4));
  // h's starting values (a layer of random weights shrinks them: each check starts from these).
  auto reset_h = [&] {
    std::vector<float> x(2 * kHidden, 0.0f);
    for (int64_t i = 0; i < kHidden; ++i) x[i] = 0.01f * static_cast<float>(i % 37) - 0.18f;
    STRATA_CUDA_CHECK(cudaMemcpy(h, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  };
  reset_h();

  std::vector<Phase> phases;
  std::vector<const uint8_t*> mats;
  std::vector<int64_t> sizes;
  double bytes = 0;
  auto matrix = [&](int64_t rows, int64_t k) {
    const int64_t units = rows / 16 * (k / G::kTileK);
    uint8_t* w = device_alloc<uint8_t>(static_cast<size_t>(units * kUnitBytes));
    fill_units<<<1024, 256, 0, st>>>(w, units, 0x9E3779B9u * static_cast<uint32_t>(mats.size() + 1));
    STRATA_CUDA_CHECK(cudaGetLastError());
    mats.push_back(w);
    sizes.push_back(units * kUnitBytes);
    bytes += static_cast<double>(units * kUnitBytes);
    return w;
  };
  constexpr int kLayers = 32;
  for (int l = 0; l < kLayers; ++l) {
    const int64_t n_in = (l + 1) % 4 == 0 ? 10240 : kProj;  // every fourth layer is full attention
    phases.push_back({matrix(n_in, kHidden), static_cast<int>(n_in / 16), 16, h, kHidden, nullptr, nullptr, proj,
                      kProj, nullptr, kMatmul});
    phases.push_back({matrix(kHidden, kHidden), 256, 16, proj, kProj, nullptr, nullptr, o, kHidden, nullptr, kMatmul});
    phases.push_back({matrix(kGateUp, kHidden), 1536, 16, o, kHidden, nullptr, nullptr, gu, kGateUp, nullptr, kMatmul});
    phases.push_back({nullptr, 0, kMaxTiles, gu + kGateUp / 2, kGateUp, gu, nullptr, nullptr, 0, converted, kConvert});
    phases.push_back({matrix(kHidden, 3 * kHidden), 256, kMaxTiles, nullptr, 0, nullptr, converted, h, kHidden, nullptr,
                      kMatmul});
  }
  // The kernel's limits: a block's share of a matrix touches at most kMaxBlockMTiles m-tiles, and an
  // m-tile is split between at most two blocks (a share holds at least one m-tile's units).
  for (const Phase& ph : phases) {
    if (ph.kind != kMatmul) continue;
    const int64_t units = static_cast<int64_t>(ph.m_tiles) * ph.k_tiles;
    const int64_t per_block = units / sms;
    if (per_block < ph.k_tiles || (per_block + 1) / ph.k_tiles + 2 > kMaxBlockMTiles) {
      std::printf("%s: %d SMs share the matrices too finely or too coarsely for this kernel\n", prop.name, sms);
      return 0;
    }
  }
  Phase* d_phases = device_alloc<Phase>(phases.size());
  STRATA_CUDA_CHECK(
      cudaMemcpy(d_phases, phases.data(), phases.size() * sizeof(Phase), cudaMemcpyHostToDevice));
  unsigned* done = device_alloc<unsigned>(phases.size());
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(stream_chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared_bytes(4))));
  auto run = [&](int n, int stages, int flags) {
    STRATA_CUDA_CHECK(cudaMemsetAsync(done, 0, phases.size() * 4, st));
    stream_chain_kernel<<<sms, kThreads, shared_bytes(stages), st>>>(d_phases, n, done, stages, flags);
    STRATA_CUDA_CHECK(cudaGetLastError());
  };
  STRATA_CUDA_CHECK(cudaStreamSynchronize(st));

  // The launched form: phases [0, n) one launch each, with PDL.
  const size_t launched_max_smem = launched_shared_bytes(phases[4], 3);  // the down projection's is the largest
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(launched_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(launched_max_smem)));
  unsigned* gate_slots = device_alloc<unsigned>(kGateSlots + 1 + phases.size());
  auto run_launched = [&](int n, int stages, int flags) {
    if (flags & kSmGate) {  // slots and counts; the fallbacks add up over runs
      STRATA_CUDA_CHECK(cudaMemsetAsync(gate_slots, 0, kGateSlots * 4, st));
      STRATA_CUDA_CHECK(cudaMemsetAsync(gate_slots + kGateSlots + 1, 0, phases.size() * 4, st));
    }
    unsigned previous_post = 0;  // the last matmul's
    for (int p = 0; p < n; ++p) {
      const Phase& ph = phases[static_cast<size_t>(p)];
      const SmGate gate{gate_slots, gate_slots + kGateSlots, gate_slots + kGateSlots + 1, previous_post,
                        static_cast<unsigned>(p + 1)};
      if (ph.kind == kMatmul) previous_post = gate.post;
      const int ph_stages = launched_stages(ph, stages);
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(static_cast<unsigned>(sms));
      config.blockDim = dim3(kLaunchThreads);
      config.dynamicSmemBytes = launched_shared_bytes(ph, ph_stages);
      config.stream = st;
      config.attrs = &attribute;
      config.numAttrs = 1;
      STRATA_CUDA_CHECK(cudaLaunchKernelEx(&config, launched_kernel, ph, ph_stages, flags, gate));
    }
  };
  {
    int per_sm = 0;
    STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, launched_kernel, kLaunchThreads,
                                                                    launched_max_smem));
    std::printf("launched form: %zu bytes of shared memory at most, %d such blocks fit an SM\n", launched_max_smem,
                per_sm);
  }

  // The first five phases (one layer), each from the GPU's own input, against the host; for both
  // forms.
  bool ok = true;
  auto check = [&](const char* form, auto&& run_n) {
    reset_h();
    for (int n = 1; n <= 5; ++n) {
      const Phase& ph = phases[n - 1];
      if (ph.kind != kMatmul) continue;
      run_n(n - 1);
      STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
      std::vector<float> x(static_cast<size_t>(ph.k_tiles) * G::kTileK);
      if (ph.converted != nullptr) {  // SiLU(gate) ⊙ up from gate/up's parts
        const std::vector<float> parts = download(gu, 2 * kGateUp);
        for (int64_t k = 0; k < kGateUp / 2; ++k) {
          const float gate = parts[k] + parts[kGateUp + k], up = parts[kGateUp / 2 + k] + parts[kGateUp * 3 / 2 + k];
          x[k] = gate / (1.0f + std::exp(-gate)) * up;
        }
      } else {
        const std::vector<float> parts = download(ph.in, static_cast<size_t>(2 * ph.in_stride));
        for (size_t k = 0; k < x.size(); ++k) x[k] = parts[k] + parts[ph.in_stride + k];
      }
      run_n(n);
      STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
      const std::vector<uint8_t> w =
          download(ph.units, static_cast<size_t>(ph.m_tiles) * ph.k_tiles * kUnitBytes);
      const std::vector<float> y = download(ph.out, static_cast<size_t>(2 * ph.out_stride));
      const std::vector<double> ref = reference(w, ph.m_tiles, ph.k_tiles, x);
      double worst = 0, largest = 0;
      for (size_t r = 0; r < ref.size(); ++r) {
        largest = std::max(largest, std::fabs(ref[r]));
        worst = std::max(worst, std::fabs(static_cast<double>(y[r]) + y[ph.out_stride + r] - ref[r]));
      }
      std::printf("check: %s, matrix %d (%zu rows, K %d): max |error| %.3g, max |y| %.3g\n", form, n - 1, ref.size(),
                  ph.k_tiles * G::kTileK, worst, largest);
      if (!(worst <= 1e-4 * largest)) ok = false;
    }
  };
  check("counter chain", [&](int n) { run(n, 4, 0); });
  check("launched", [&](int n) { run_launched(n, 3, 0); });
  check("launched, released after the last copy", [&](int n) { run_launched(n, 3, kReleaseAfterIssue); });
  check("launched, gated per SM", [&](int n) { run_launched(n, 4, kSmGate); });
  if (!ok) {
    std::printf("check FAILED\n");
    return 1;
  }

  const double peak = strata::backend::cuda::device_peak_bandwidth_bytes();
  std::printf("\ncommand: %s\ndevice: %s, %d SMs, peak memory bandwidth %.0f GB/s\n", argv[0], prop.name, sms,
              peak / 1e9);
  std::printf("weights: %.3f GB in %zu matrices (%d layers, no lm_head), repacked in tile order\n\n", bytes / 1e9,
              mats.size(), kLayers);
  std::printf("| variant (mean of 20) | ring stages | ms | GB/s | %% of peak |\n|---|---|---|---|---|\n");
  auto timed = [&](const std::string& name, int stages, auto&& body) {
    cudaEvent_t a, z;
    STRATA_CUDA_CHECK(cudaEventCreate(&a));
    STRATA_CUDA_CHECK(cudaEventCreate(&z));
    for (int i = 0; i < 3; ++i) body();
    STRATA_CUDA_CHECK(cudaEventRecord(a, st));
    constexpr int kReps = 20;
    for (int i = 0; i < kReps; ++i) body();
    STRATA_CUDA_CHECK(cudaEventRecord(z, st));
    STRATA_CUDA_CHECK(cudaEventSynchronize(z));
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, z));
    ms /= kReps;
    const double rate = bytes / (ms / 1e3);
    std::printf("| %s | %s | %.3f | %.0f | %.0f%% |\n", name.c_str(), stages > 0 ? std::to_string(stages).c_str() : "",
                ms, rate / 1e9, 100.0 * rate / peak);
    STRATA_CUDA_CHECK(cudaEventDestroy(a));
    STRATA_CUDA_CHECK(cudaEventDestroy(z));
  };
  // body's launches captured once as a CUDA graph, timed as replays of it.
  auto timed_graph = [&](const std::string& name, int stages, auto&& body) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    STRATA_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    body();
    STRATA_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    timed(name, stages, [&] { STRATA_CUDA_CHECK(cudaGraphLaunch(exec, st)); });
    STRATA_CUDA_CHECK(cudaGraphExecDestroy(exec));
    STRATA_CUDA_CHECK(cudaGraphDestroy(graph));
  };

  {
    const uint8_t** d_mats = device_alloc<const uint8_t*>(mats.size());
    int64_t* d_sizes = device_alloc<int64_t>(sizes.size());
    uint4* sink = device_alloc<uint4>(1);
    STRATA_CUDA_CHECK(cudaMemcpy(d_mats, mats.data(), mats.size() * 8, cudaMemcpyHostToDevice));
    STRATA_CUDA_CHECK(cudaMemcpy(d_sizes, sizes.data(), sizes.size() * 8, cudaMemcpyHostToDevice));
    timed("plain 16-byte loads, 8 blocks of 256 threads an SM, one launch", 0, [&] {
      read_all<<<sms * 8, 256, 0, st>>>(d_mats, d_sizes, static_cast<int>(mats.size()), sink);
    });
  }
  struct Variant {
    const char* name;
    int flags;
  };
  const Variant variants[] = {
      {"timing only: ring + mma, no per-matrix work, no waits", kBare | kNoWaits | kEvictFirst},
      {"timing only: per-matrix conversion and sums, no waits", kNoWaits | kEvictFirst},
      {"the chain, every dependency waited for", 0},
      {"the chain, weights copied with an L2 evict_first hint", kEvictFirst}};
  for (const Variant& v : variants)
    for (int stages : {2, 4})
      timed_graph(v.name, stages, [&] { run(static_cast<int>(phases.size()), stages, v.flags); });
  const Variant launched_variants[] = {
      {"launched: a launch a matrix, released on entry, every dependency waited for", 0},
      {"launched: released after the wait (no block of the next launch beside it)", kReleaseAfterWait},
      {"launched: released on entry, 4 stages past the ring prefetched into L2", 4 * kPrefetchUnit},
      {"launched: released on entry, 16 stages past the ring prefetched into L2", 16 * kPrefetchUnit},
      {"launched: released on entry, 48 stages past the ring prefetched into L2", 48 * kPrefetchUnit},
      {"launched, timing only: released on entry, no waits", kNoWaits},
      {"launched: released by the producer once it has issued its last copy", kReleaseAfterIssue},
      {"launched: released on entry, copies start once the SM's previous producer has issued its last",
       kSmGate},
      {"launched: gated per SM as above, 4 stages past the ring prefetched into L2", kSmGate | 4 * kPrefetchUnit},
      {"launched: gated per SM as above, 8 stages past the ring prefetched into L2", kSmGate | 8 * kPrefetchUnit}};
  for (const Variant& v : launched_variants)
    for (int stages : {2, 3, 4}) {
      if (stages == 4 && !(v.flags & (kReleaseAfterIssue | kSmGate))) continue;
      timed_graph(v.name, stages, [&] { run_launched(static_cast<int>(phases.size()), stages, v.flags); });
    }
  {
    unsigned fallbacks = 0;
    STRATA_CUDA_CHECK(cudaMemcpy(&fallbacks, gate_slots + kGateSlots, 4, cudaMemcpyDeviceToHost));
    std::printf("\nper-SM gate: %u producers started on the whole previous matrix's copies, not their SM's\n",
                fallbacks);
  }
  return dataflow(sms, st, timed_graph, h, proj, o, gu, phases) ? 0 : 1;
}
