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

// A block's equal share [first, last) of n items.
struct Share {
  int64_t first, last;
};
__device__ __forceinline__ Share share(int64_t n) {
  return {n * blockIdx.x / gridDim.x, n * (blockIdx.x + 1) / gridDim.x};
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
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) barrier_init(&full[i], 1), barrier_init(&empty[i], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int i = static_cast<int>(threadIdx.x); i < G::kTileVecs; i += blockDim.x) zeros[i] = make_uint4(0u, 0u, 0u, 0u);
  __syncthreads();

  // Stage s of the kernel sits in slot s % stages; its barriers' phase is (s / stages) & 1.
  if (warp == 0) {
    if (lane != 0) return;
    uint64_t policy = 0;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    unsigned s = 0;
    for (int p = 0; p < n_phases; ++p) {
      const Phase& ph = phases[p];
      if (ph.kind != kMatmul) continue;
      const Share sh = share(static_cast<int64_t>(ph.m_tiles) * ph.k_tiles);
      for (int64_t u = sh.first; u < sh.last; u += kStageUnits, ++s) {
        const unsigned n = static_cast<unsigned>(sh.last - u < kStageUnits ? sh.last - u : kStageUnits);
        const unsigned slot = s % stages;
        barrier_wait(&empty[slot], ((s / stages) & 1) ^ 1);
        barrier_expect(&full[slot], n * kUnitBytes);
        bulk_copy(ring + slot * kStageBytes, ph.units + u * kUnitBytes, n * kUnitBytes, &full[slot],
                  flags & kEvictFirst, policy);
      }
    }
    return;
  }

  const int cw = warp - 1, ctid = static_cast<int>(threadIdx.x) - 32;
  const int g = lane / 4, c = lane % 4;
  const bool b_active = (g / 2) == c;  // as in gemv_tc.cu
  const int b_lane = c * 2 + g % 2;
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
      float4* info = reinterpret_cast<float4*>(ph.convert_out + ph.k_tiles * G::kTileVecs);
      for (int64_t t = sh.first + cw; t < sh.last; t += kConsumerWarps) {
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
    } else {
      float4* info = reinterpret_cast<float4*>(bvec + ph.k_tiles * G::kTileVecs);
      if (!bare) {
        if (ph.converted != nullptr) {
          const int n = ph.k_tiles * (G::kTileVecs + 4);
          for (int i = ctid; i < n; i += 32 * kConsumerWarps) bvec[i] = __ldcg(ph.converted + i);
        } else {
          for (int t = cw; t < ph.k_tiles; t += kConsumerWarps) {
            const int64_t u = t * 32 + lane;
            const float4* p0 = reinterpret_cast<const float4*>(ph.in + 8 * u);
            const float4* p1 = reinterpret_cast<const float4*>(ph.in + ph.in_stride + 8 * u);
            const float4 a0 = __ldcg(p0), a1 = __ldcg(p0 + 1), b0 = __ldcg(p1), b1 = __ldcg(p1 + 1);
            const float v[8] = {a0.x + b0.x, a0.y + b0.y, a0.z + b0.z, a0.w + b0.w,
                                a1.x + b1.x, a1.y + b1.y, a1.z + b1.z, a1.w + b1.w};
            gm::store_converted<4, 1>(v, u, true, bvec, info);
          }
        }
        for (int i = ctid; i < kConsumerWarps * kMaxBlockMTiles * 16; i += 32 * kConsumerWarps) partial[i] = 0.0f;
        consumers_sync();
      }

      const Share sh = share(static_cast<int64_t>(ph.m_tiles) * ph.k_tiles);
      const int first_m = static_cast<int>(sh.first / ph.k_tiles);
      float acc[2] = {0.0f, 0.0f};
      int m_cur = -1;
      auto flush = [&] {  // the warp's sums of rows g and g+8 of m-tile m_cur
        if (m_cur < 0) return;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float r = acc[h];
          r += __shfl_xor_sync(0xffffffffu, r, 1);
          r += __shfl_xor_sync(0xffffffffu, r, 2);
          if (c == 0) partial[(cw * kMaxBlockMTiles + (m_cur - first_m)) * 16 + g + 8 * h] = r;
        }
        acc[0] = acc[1] = 0.0f;
      };
      for (int64_t u = sh.first; u < sh.last; u += kStageUnits, ++s) {
        const unsigned slot = s % stages;
        barrier_wait(&full[slot], (s / stages) & 1);
        const int64_t mine = u + cw;
        if (mine < sh.last) {
          const int m = static_cast<int>(mine / ph.k_tiles), t = static_cast<int>(mine % ph.k_tiles);
          if (m != m_cur) flush(), m_cur = m;
          const uint8_t* unit = ring + slot * kStageBytes + cw * kUnitBytes;
          const uint4* cu = reinterpret_cast<const uint4*>(unit);
          uint4 code[2][2];
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int half = 0; half < 2; ++half) code[h][half] = cu[(h * 2 + half) * 32 + lane];
          const uint2 meta = reinterpret_cast<const uint2*>(unit + kCodeBytes)[lane];
          const float4 run = info[t * 4 + c];
          int d1[4] = {}, d2[4] = {};
          gm::tile_dot<4>(code, b_active ? bvec + t * G::kTileVecs + b_lane : zeros, 0, G::kSteps, d1, d2);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float scale = __uint_as_float(h == 0 ? meta.x << 16 : meta.x & 0xFFFF0000u);
            const float bias = __uint_as_float(h == 0 ? meta.y << 16 : meta.y & 0xFFFF0000u);
            acc[h] += gm::row_dot(d1, d2, h) * (scale * run.x) + bias * run.y;
          }
        }
        __syncwarp();
        if (lane == 0) barrier_arrive(&empty[slot]);
      }
      flush();
      if (bare) continue;
      consumers_sync();
      const int n_m = sh.last > sh.first ? static_cast<int>((sh.last - 1) / ph.k_tiles) - first_m + 1 : 0;
      for (int i = ctid; i < n_m * 16; i += 32 * kConsumerWarps) {
        float sum = 0.0f;
        for (int w = 0; w < kConsumerWarps; ++w) sum += partial[(w * kMaxBlockMTiles + i / 16) * 16 + i % 16];
        const int64_t m = first_m + i / 16;
        const int part = m * ph.k_tiles >= sh.first ? 0 : 1;  // part 1: the block holding the m-tile's end
        ph.out[part * ph.out_stride + m * 16 + i % 16] = sum;
      }
    }
    consumers_sync();
    if (ctid == 0) {
      __threadfence();
      atomicAdd(&done[p], 1u);
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
  float* h = device_alloc<float>(2 * kHidden);
  float* proj = device_alloc<float>(2 * kProj);
  float* o = device_alloc<float>(2 * kHidden);
  float* gu = device_alloc<float>(2 * kGateUp);
  uint4* converted = device_alloc<uint4>(kMaxTiles * (G::kTileVecs + 4));
  {
    std::vector<float> x(kHidden);
    for (int64_t i = 0; i < kHidden; ++i) x[i] = 0.01f * static_cast<float>(i % 37) - 0.18f;
    STRATA_CUDA_CHECK(cudaMemcpy(h, x.data(), kHidden * 4, cudaMemcpyHostToDevice));
  }

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

  // The first five phases (one layer), each from the GPU's own input, against the host.
  bool ok = true;
  for (int n = 1; n <= 5; ++n) {
    const Phase& ph = phases[n - 1];
    if (ph.kind != kMatmul) continue;
    run(n - 1, 4, 0);
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
    run(n, 4, 0);
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
    std::printf("check: matrix %d (%zu rows, K %d): max |error| %.3g, max |y| %.3g\n", n - 1, ref.size(),
                ph.k_tiles * G::kTileK, worst, largest);
    if (!(worst <= 1e-4 * largest)) ok = false;
  }
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
  auto timed = [&](const char* name, int stages, auto&& body) {
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
    std::printf("| %s | %s | %.3f | %.0f | %.0f%% |\n", name, stages > 0 ? std::to_string(stages).c_str() : "",
                ms, rate / 1e9, 100.0 * rate / peak);
    STRATA_CUDA_CHECK(cudaEventDestroy(a));
    STRATA_CUDA_CHECK(cudaEventDestroy(z));
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
    for (int stages : {2, 4}) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      STRATA_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      run(static_cast<int>(phases.size()), stages, v.flags);
      STRATA_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      timed(v.name, stages, [&] { STRATA_CUDA_CHECK(cudaGraphLaunch(exec, st)); });
      STRATA_CUDA_CHECK(cudaGraphExecDestroy(exec));
      STRATA_CUDA_CHECK(cudaGraphDestroy(graph));
    }
  return 0;
}
