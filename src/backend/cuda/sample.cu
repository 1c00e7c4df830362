// A token drawn from one row of logits on the GPU (sample_row: backend/ops.h, the rules in
// backend/row_draw.h), so that temperature sampling reads back one token id instead of the row;
// and the sampler's logit edits before it (edit_logits).
//
// Work. One cluster of up to 8 blocks of 1024 threads takes the row, each block a contiguous slice
// that it keeps in shared memory as v = x / temperature (NaN for a logit that is no candidate), or
// re-reads from global memory where the slice does not fit. Blocks share counts and sums through
// each other's shared memory after a cluster barrier, always adding them in rank order; every sum is
// an integer, so every block (and the CPU's sort) reaches the same decisions.
// - The pick needs no order but the ids': each block weighs the kept tokens of its slice, and the
//   block whose share holds the target finds the token with a block-wide prefix sum.
// - A cut by count (top-k) or weight (top-p) is a selection in the draw's order. Its first round
//   bins the candidates by their distance below the best value, 256 equal steps down to the worst
//   (so a flat row spreads over the bins instead of piling into the few its float bits share), and
//   walks the cluster's bins from the best to the one where the running count or weight reaches the
//   target. The later rounds resolve that bin's candidates by their 56-bit order keys, 8 bits a
//   round from the top, over a list of them in shared memory; a selection ends once its bin holds
//   one candidate, the last its cut keeps.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cluster.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/warp.h"
#include "backend/row_draw.h"

namespace strata::backend::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 8;  // the portable cluster size
constexpr int kBins = 256;
constexpr int kDigits = 7;               // 56-bit keys, 8 bits a round
constexpr int64_t kMinSlice = 8192;      // candidates a block takes at least (short rows take fewer blocks)
constexpr int64_t kMaxListed = 65536;    // list entries are 16-bit slice indices
constexpr size_t kStaticShared = 16384;  // a bound on the kernel's static shared memory

static_assert(kDigits * 8 == 32 + row_draw::kIdBits, "an order key is a value key and an id");

// What a block publishes to the cluster in one exchange: counts and weights by bin (a selection
// round), or a total in bin 0; and its candidates' largest and smallest value keys.
struct Record {
  unsigned count[kBins];
  unsigned long long mass[kBins];
  unsigned max_key, min_key;
};

// The bin a selection round chose, with the count and weight of the bins above it, and the target
// (the first round may lower it to the total).
struct Pick {
  unsigned bin;
  unsigned long long count_above, mass_above, target;
};

struct Shared {
  Record records[2];  // alternate exchanges: one may be read while the next is filled
  unsigned merged_count[kBins];
  unsigned long long merged_mass[kBins];
  Pick pick;
  unsigned long long warp_sums[kWarps];
  unsigned listed;  // entries in the list of a selection's bin
};
static_assert(sizeof(Shared) <= kStaticShared, "kStaticShared bounds the kernel's static shared memory");

__device__ __forceinline__ float no_candidate() { return __int_as_float(0x7FC00000); }  // a NaN

__device__ __forceinline__ float candidate_value(float logit, float temperature) {
  return (isnan(logit) || logit == -INFINITY) ? no_candidate() : logit / temperature;
}

// row_draw::value_key inverted.
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? (key & 0x7FFFFFFFu) : ~key);
}

// The first round's bins: 256 equal steps of value from the best (bin 255) down to the worst
// (bin 0), by a computation that never orders two values against their keys.
struct Coarse {
  float max_v, scale;  // scale: bins per unit of value below max_v (0 where the span is not finite)

  __device__ unsigned bin(float v) const {
    const float d = v == max_v ? 0.0f : (max_v - v) * scale;  // NaN (inf · 0) counts as the farthest
    return kBins - 1 - static_cast<unsigned>(fminf(d, kBins - 1));
  }
};

// Which candidates are kept so far: those of coarse bins above `coarse`, those of that bin with
// order keys from min_key up, and of those the ones with weights from min_w up.
struct Cut {
  int coarse = -1;
  uint64_t min_key = 0;
  float min_w = 0.0f;
};

// A selection's cut (coarse and min_key as in Cut) and the weight it keeps.
struct Selection {
  int coarse;
  uint64_t min_key;
  unsigned long long mass;
};

// This block's slice of the row.
struct Slice {
  const float* x;       // the row's logits
  const float* cached;  // the slice's values in shared memory, or nullptr: re-read from x
  int64_t begin, n;
  float temperature;

  __device__ float value(int64_t j) const {
    return cached != nullptr ? cached[j] : candidate_value(x[begin + j], temperature);
  }
};

// One entry of the slice: its coarse bin, order key and weight, and whether the cut keeps it.
struct Entry {
  bool in;
  unsigned coarse;
  uint64_t key;
  unsigned long long W;
};

__device__ __forceinline__ Entry entry(const Slice& s, int64_t j, const Coarse& c, const Cut& cut) {
  Entry e{false, 0, 0, 0};
  if (j >= s.n) return e;
  const float v = s.value(j);
  if (isnan(v)) return e;
  e.coarse = c.bin(v);
  e.key = row_draw::order_key(v, s.begin + j);
  const float w = row_draw::weight(v, c.max_v);
  e.W = row_draw::fixed_weight(w);
  const int coarse = static_cast<int>(e.coarse);
  e.in = (coarse > cut.coarse || (coarse == cut.coarse && e.key >= cut.min_key)) && w >= cut.min_w;
  return e;
}

// Adds the lanes' entries that are `in` to their bins: those sharing the first one's bin with one
// atomic (a peaked row's tail mostly shares one bin), the others one each (a flat row spreads).
__device__ __forceinline__ void add_to_bin(Record& r, bool in, unsigned bin, unsigned long long W) {
  const unsigned active = __ballot_sync(0xffffffffu, in);
  if (active == 0) return;
  const int first = __ffs(active) - 1;
  const unsigned lead = __shfl_sync(0xffffffffu, bin, first);
  const bool shared = in && bin == lead;
  const unsigned group = __ballot_sync(0xffffffffu, shared);
  const unsigned long long sum = warp_sum(shared ? W : 0);
  if (static_cast<int>(threadIdx.x % 32) == first) {
    atomicAdd(&r.count[lead], static_cast<unsigned>(__popc(group)));
    atomicAdd(&r.mass[lead], sum);
  }
  if (in && !shared) {
    atomicAdd(&r.count[bin], 1u);
    atomicAdd(&r.mass[bin], W);
  }
}

// The next exchange's record of this block, zeroed (every thread of the block calls it).
__device__ Record& open_exchange(Shared& sh, int& exchanges) {
  Record& r = sh.records[exchanges++ & 1];
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) r.count[i] = 0, r.mass[i] = 0;
  if (threadIdx.x == 0) r.max_key = 0, r.min_key = ~0u;
  __syncthreads();
  return r;
}

// After every block has filled its record: the cluster's records are readable.
__device__ void close_exchange() {
  __syncthreads();
  cluster_sync();
}

// The blocks' bin 0 weights: this block's, the sum of the blocks before it, and of all.
struct Totals {
  unsigned long long mine, before, all;
};
__device__ Totals exchanged_mass(const Record& r) {
  Totals t{0, 0, 0};
  for (int b = 0; b < static_cast<int>(gridDim.x); ++b) {
    const unsigned long long m = in_block(&r, b)->mass[0];
    if (b < cluster_rank()) t.before += m;
    if (b == cluster_rank()) t.mine = m;
    t.all += m;
  }
  return t;
}

// Publishes the weight the cut keeps in this block's slice; returns the sums over the cluster.
__device__ Totals kept_mass(const Slice& s, const Coarse& c, const Cut& cut, Shared& sh, int& exchanges) {
  Record& r = open_exchange(sh, exchanges);
  unsigned long long mine = 0;
  for (int64_t j = threadIdx.x; j < s.n; j += blockDim.x) {
    const Entry e = entry(s, j, c, cut);
    if (e.in) mine += e.W;
  }
  mine = warp_sum(mine);
  if (threadIdx.x % 32 == 0) atomicAdd(&r.mass[0], mine);
  close_exchange();
  return exchanged_mass(r);
}

// Sums the cluster's bins into sh.merged_* (threads 0..255), for choose_bin.
__device__ void merge_bins(const Record& r, Shared& sh) {
  if (threadIdx.x < kBins) {
    unsigned c = 0;
    unsigned long long m = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) {
      const Record* other = in_block(&r, static_cast<int>(b));
      c += other->count[threadIdx.x];
      m += other->mass[threadIdx.x];
    }
    sh.merged_count[threadIdx.x] = c;
    sh.merged_mass[threadIdx.x] = m;
  }
  __syncthreads();
}

// Warp 0 of each block: walks the merged bins from the top to the one where `above` plus the
// running count (or weight) reaches the target, and publishes it in sh.pick. In a selection's first
// round the target is first lowered to the total, should rounding have put it above.
__device__ void choose_bin(Shared& sh, bool by_mass, unsigned long long above, unsigned long long target,
                           bool first_round) {
  const unsigned lane = threadIdx.x % 32;
  unsigned long long m[8], local = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const unsigned b = kBins - 1 - (8 * lane + i);
    m[i] = by_mass ? sh.merged_mass[b] : sh.merged_count[b];
    local += m[i];
  }
  unsigned long long inclusive = local;
  for (int o = 1; o < 32; o *= 2) {
    const unsigned long long v = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= static_cast<unsigned>(o)) inclusive += v;
  }
  const unsigned long long total = __shfl_sync(0xffffffffu, inclusive, 31);
  if (first_round) target = min(target, above + total);
  unsigned long long running = above + inclusive - local;
  int found = -1;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (found >= 0) continue;
    if (running + m[i] >= target) {
      found = i;
    } else {
      running += m[i];
    }
  }
  const unsigned lanes = __ballot_sync(0xffffffffu, found >= 0);
  const int owner = __ffs(lanes) - 1;  // some lane finds it: the target is at most above + total
  const unsigned bin = kBins - 1 - (8 * owner + __shfl_sync(0xffffffffu, found, owner));
  unsigned long long count_above = 0, mass_above = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const unsigned b = kBins - 1 - (8 * lane + i);
    if (b > bin) count_above += sh.merged_count[b], mass_above += sh.merged_mass[b];
  }
  count_above = warp_sum(count_above);
  mass_above = warp_sum(mass_above);
  if (lane == 0) sh.pick = {bin, count_above, mass_above, target};
}

// One selection round after the exchange: merges the bins, chooses one, and returns the pick (every
// thread).
__device__ Pick choose(const Record& r, Shared& sh, bool by_mass, unsigned long long above_count,
                       unsigned long long above_mass, unsigned long long target, bool first_round) {
  merge_bins(r, sh);
  if (threadIdx.x < 32) choose_bin(sh, by_mass, by_mass ? above_mass : above_count, target, first_round);
  __syncthreads();
  return sh.pick;  // rewritten only after the next exchange's barrier
}

// The shortest prefix, in the draw's order, of the candidates the cut keeps whose running count
// (or weight) reaches target. `list` (16-bit slice indices, room for the whole slice) or nullptr.
__device__ Selection select(const Slice& s, const Coarse& c, const Cut& cut, bool by_mass, unsigned long long target,
                            Shared& sh, int& exchanges, uint16_t* list) {
  unsigned long long count_above = 0, mass_above = 0;
  // Every thread makes the same number of trips through these loops, so whole warps reach
  // add_to_bin together.
  Record& r0 = open_exchange(sh, exchanges);
  for (int64_t base = 0; base < s.n; base += blockDim.x) {
    const Entry e = entry(s, base + threadIdx.x, c, cut);
    add_to_bin(r0, e.in, e.coarse, e.W);
  }
  close_exchange();
  if (threadIdx.x == 0) sh.listed = 0;
  Pick pick = choose(r0, sh, by_mass, 0, 0, target, true);
  const int coarse = static_cast<int>(pick.bin);
  target = pick.target;
  count_above += pick.count_above, mass_above += pick.mass_above;
  if (sh.merged_count[coarse] == 1) return {coarse, 0, mass_above + sh.merged_mass[coarse]};

  uint64_t prefix = 0;
  for (int d = 0;; ++d) {
    const int shift = 8 * (kDigits - 1 - d);
    Record& r = open_exchange(sh, exchanges);
    const bool from_list = list != nullptr && d > 0;
    const int64_t n = from_list ? sh.listed : s.n;
    for (int64_t base = 0; base < n; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      const Entry e = entry(s, from_list ? (i < n ? list[i] : s.n) : i, c, cut);
      const bool member = e.in && static_cast<int>(e.coarse) == coarse && (e.key >> (shift + 8)) == prefix;
      if (list != nullptr && d == 0) {  // list the bin's candidates for the later rounds
        const unsigned members = __ballot_sync(0xffffffffu, member);
        unsigned slot = 0;
        if (threadIdx.x % 32 == 0 && members != 0) slot = atomicAdd(&sh.listed, static_cast<unsigned>(__popc(members)));
        slot = __shfl_sync(0xffffffffu, slot, 0) + __popc(members & ((1u << (threadIdx.x % 32)) - 1u));
        if (member) list[slot] = static_cast<uint16_t>(i);
      }
      add_to_bin(r, member, static_cast<unsigned>(e.key >> shift) & (kBins - 1), e.W);
    }
    close_exchange();
    pick = choose(r, sh, by_mass, count_above, mass_above, target, false);
    prefix = (prefix << 8) | pick.bin;
    count_above += pick.count_above, mass_above += pick.mass_above;
    if (sh.merged_count[pick.bin] == 1 || d == kDigits - 1)
      return {coarse, prefix << shift, mass_above + sh.merged_mass[pick.bin]};
  }
}

// The exclusive prefix sum of v over the block's threads (every thread calls it).
__device__ unsigned long long block_exclusive_sum(unsigned long long v, Shared& sh) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned long long inclusive = v;
  for (int o = 1; o < 32; o *= 2) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= static_cast<unsigned>(o)) inclusive += t;
  }
  if (lane == 31) sh.warp_sums[warp] = inclusive;
  __syncthreads();
  unsigned long long before = 0;
  for (unsigned w = 0; w < warp; ++w) before += sh.warp_sums[w];
  return before + inclusive - v;
}

__global__ void __launch_bounds__(kThreads)
    sample_row_kernel(const float* __restrict__ x, int64_t V, int64_t slice, RowDraw draw, bool cache,
                      int32_t* __restrict__ out) {
  extern __shared__ float cached[];
  __shared__ Shared sh;
  const int rank = cluster_rank();
  const int64_t begin = rank * slice;
  const Slice s{x, cache ? cached : nullptr, begin, std::max<int64_t>(0, std::min(slice, V - begin)),
                draw.temperature};
  uint16_t* list = cache && slice <= kMaxListed ? reinterpret_cast<uint16_t*>(cached + slice) : nullptr;
  wait_for_inputs();
  if (cache)
    for (int64_t j = threadIdx.x; j < s.n; j += blockDim.x) cached[j] = candidate_value(x[begin + j], s.temperature);
  int exchanges = 0;

  // The largest and smallest values, and the number of candidates.
  Record& stats = open_exchange(sh, exchanges);
  unsigned max_key = 0, min_key = ~0u, n = 0;
  for (int64_t j = threadIdx.x; j < s.n; j += blockDim.x) {
    const float v = s.value(j);
    if (isnan(v)) continue;
    const unsigned k = row_draw::value_key(v);
    max_key = max(max_key, k), min_key = min(min_key, k), ++n;
  }
  for (int o = 16; o > 0; o /= 2) {
    max_key = max(max_key, __shfl_xor_sync(0xffffffffu, max_key, o));
    min_key = min(min_key, __shfl_xor_sync(0xffffffffu, min_key, o));
    n += __shfl_xor_sync(0xffffffffu, n, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&stats.max_key, max_key);
    atomicMin(&stats.min_key, min_key);
    atomicAdd(&stats.count[0], n);
  }
  close_exchange();
  max_key = 0, min_key = ~0u;
  unsigned long long candidates = 0;
  for (unsigned b = 0; b < gridDim.x; ++b) {
    const Record* other = in_block(&stats, static_cast<int>(b));
    max_key = max(max_key, other->max_key), min_key = min(min_key, other->min_key);
    candidates += other->count[0];
  }

  if (candidates == 0) {
    if (rank == 0 && threadIdx.x == 0) *out = -1;
  } else {
    const float max_v = key_value(max_key), span = max_v - key_value(min_key);
    const Coarse c{max_v, span > 0.0f && span < INFINITY ? (kBins - 0.01f) / span : 0.0f};
    Cut cut;
    if (draw.top_k > 0 && static_cast<unsigned long long>(draw.top_k) < candidates) {
      const Selection k = select(s, c, cut, false, static_cast<unsigned long long>(draw.top_k), sh, exchanges, list);
      cut.coarse = k.coarse, cut.min_key = k.min_key;
      if (draw.top_p < 1.0f) {
        const Selection p = select(s, c, cut, true, row_draw::reach_target(draw.top_p, k.mass), sh, exchanges, list);
        cut.coarse = p.coarse, cut.min_key = p.min_key;
      }
    } else if (draw.top_p < 1.0f) {
      const Totals all = kept_mass(s, c, cut, sh, exchanges);
      const Selection p = select(s, c, cut, true, row_draw::reach_target(draw.top_p, all.all), sh, exchanges, list);
      cut.coarse = p.coarse, cut.min_key = p.min_key;
    }
    cut.min_w = draw.min_p;

    // The pick: the kept tokens in id order, the slices in rank order.
    const Totals kept = kept_mass(s, c, cut, sh, exchanges);
    const unsigned long long target = row_draw::reach_target(draw.u, kept.all);
    if (kept.before < target && target <= kept.before + kept.mine) {  // the same in every thread
      const int64_t chunk = (s.n + blockDim.x - 1) / blockDim.x;
      const int64_t lo = std::min<int64_t>(s.n, threadIdx.x * chunk), hi = std::min<int64_t>(s.n, lo + chunk);
      unsigned long long own = 0;
      for (int64_t j = lo; j < hi; ++j) {
        const Entry e = entry(s, j, c, cut);
        if (e.in) own += e.W;
      }
      const unsigned long long local = target - kept.before;
      unsigned long long run = block_exclusive_sum(own, sh);
      if (run < local && local <= run + own) {
        for (int64_t j = lo; j < hi; ++j) {
          const Entry e = entry(s, j, c, cut);
          if (e.in && (run += e.W) >= local) {
            *out = static_cast<int32_t>(begin + j);
            break;
          }
        }
      }
    }
  }
  cluster_sync();  // no block leaves while another may still read its shared memory
}

__global__ void edit_logits_kernel(float* __restrict__ x, const int32_t* __restrict__ ids,
                                   const int32_t* __restrict__ counts, const float* __restrict__ biases, int64_t n,
                                   LogitPenalties penalties) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[ids[i]] = edited_logit(x[ids[i]], biases[i], counts[i], penalties);
}

// One thread a token: structured output's mask (a clear bit: the token may not come next).
__global__ void mask_logits_kernel(float* __restrict__ x, const uint32_t* __restrict__ mask, int64_t n) {
  wait_for_inputs();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && !((mask[i >> 5] >> (i & 31)) & 1u)) x[i] = -INFINITY;
}

}  // namespace

void mask_logits(const Tensor& x, const Tensor& mask) {
  const int64_t n = x.numel();
  constexpr int threads = 256;
  launch(mask_logits_kernel, static_cast<unsigned>((n + threads - 1) / threads), threads, 0, x.as<float>(),
         mask.as<const uint32_t>(), n);
}

void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties) {
  const int64_t n = ids.numel();
  constexpr int threads = 256;
  launch(edit_logits_kernel, static_cast<unsigned>((n + threads - 1) / threads), threads, 0, x.as<float>(),
         ids.as<const int32_t>(), counts.as<const int32_t>(), biases.as<const float>(), n, penalties);
}

// The shared memory a block may take, and the largest cluster the device can place with that much
// per block (8 on an H100; fewer where a partition of the GPU has fewer multiprocessors), found once.
struct Capacity {
  size_t shared_bytes;
  int64_t cluster;
};
Capacity capacity() {
  static const Capacity c = [] {
    Capacity r{static_cast<size_t>(max_optin_shared_bytes()) - kStaticShared, 1};
    allow_shared_bytes(sample_row_kernel, r.shared_bytes);
    if (!clusters_supported()) return r;
    for (int64_t n = kMaxCluster; n > 1; n /= 2) {
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim = {static_cast<unsigned>(n), 1, 1};
      cudaLaunchConfig_t config{};
      config.gridDim = static_cast<unsigned>(n);
      config.blockDim = kThreads;
      config.dynamicSmemBytes = r.shared_bytes;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, sample_row_kernel, &config) == cudaSuccess && clusters > 0) {
        r.cluster = n;
        break;
      }
      (void)cudaGetLastError();  // a size the device refuses is not an error of the next call
    }
    return r;
  }();
  return c;
}

void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out) {
  const int64_t V = x.numel();
  const Capacity cap = capacity();
  const int64_t blocks = std::clamp<int64_t>((V + kMinSlice - 1) / kMinSlice, 1, cap.cluster);
  const int64_t slice = (V + blocks - 1) / blocks;
  // The slice's values, and room to list all of them in a selection.
  const size_t bytes = static_cast<size_t>(slice) * (sizeof(float) + (slice <= kMaxListed ? sizeof(uint16_t) : 0));
  const bool cache = bytes <= cap.shared_bytes;
  launch_clustered(static_cast<unsigned>(blocks), sample_row_kernel, static_cast<unsigned>(blocks), kThreads,
                   cache ? bytes : 0, x.as<const float>(), V, slice, draw, cache, out.as<int32_t>());
}

}  // namespace strata::backend::cuda
