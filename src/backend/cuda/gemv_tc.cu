// Decode matmul (one activation row) of MLX affine 4/8-bit weights on tensor cores.
//
// A CUDA-core GEMV spends three instructions per 4-bit weight (unpack, convert, FMA) and ran at
// 40-45% of an H100's memory bandwidth. Here the codes become fp16 integers with one LOP3 per two
// codes plus one HSUB2/HFMA2 (exact: 0..255 are fp16 integers), and an mma.sync m16n8k16 does the
// multiply-adds with fp32 accumulation. The activations enter as two fp16 columns, hi and lo
// (x·2^e = hi + lo, with a power-of-two e per 64 or 32 activations that puts their largest
// magnitude near 2^14): 22 significant bits, so the result matches the fp32 CPU matmul to
// about 1e-6 relative, as the CUDA-core kernel did.
//
// Layout. A warp owns 16 rows (one m-tile, or two: kMT) and walks k in tiles of 128 bytes of codes
// per row (256 4-bit or 128 8-bit weights); the block's warps take turns along k and sum through
// shared memory at the end. In a tile, lane (g = lane/4, c = lane%4) loads 32 bytes of rows g and
// g+8: a "run" of 64 (4-bit) or 32 (8-bit) codes starting at k = c·run. The mma's 16 k-slots of
// lane c are filled from lane c's run only, so column pair (2c, 2c+1) of B holds the hi/lo
// activations of run c and is zero elsewhere: C[row][2c] + C[row][2c+1] is row·x over run c alone,
// and run c lies in one quantization group (or two halves, at 4 bits with groups of 32), so lane c
// applies its own group's scale and bias when it folds C into its fp32 sum. In the MLX packing,
// 32-bit word m of a run holds codes 8m..8m+7 (4-bit, LSB first); the fp16 pairs come out as codes
// (0,4), (1,5), (2,6), (3,7) of the word, and the activations are paired the same way.
//
// The MLP's down projection reads SiLU(gate) ⊙ up, formed as the activations are converted
// (silu_mul_matmul), so that product never takes a launch of its own.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_tc.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/scale_type.h"
#include "backend/cuda/segments.h"

namespace strata::backend::cuda {

namespace {

constexpr int kTileBytes = 128;    // bytes of codes per row per k-tile
constexpr int kMaxWarps = 8;       // per block
constexpr int kTargetExp = 14;     // hi/lo scaling puts max |x| in [2^14, 2^15)

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 v;
  // Weights are read once per step: keep them out of L1, where the activations live.
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

// Codes (0,4), (1,5), (2,6), (3,7) of a 4-bit word as fp16 pairs. Nibbles 0 and 1 of each half
// word are masked in place into the mantissa of 1024 (1024 + q, 1024 + 16q: both exact); the word
// shifted by 8 gives nibbles 2 and 3. Subtracting 1024, or scaling by 1/16 and subtracting 64,
// leaves q exactly.
__device__ __forceinline__ void unpack4(uint32_t w, uint32_t (&p)[4]) {
  const __half2 k1024 = bits_h2(0x64006400u), k1_16 = bits_h2(0x2C002C00u), km64 = bits_h2(0xD400D400u);
  const uint32_t w8 = w >> 8;
  p[0] = h2_bits(__hsub2(bits_h2((w & 0x000F000Fu) | 0x64006400u), k1024));
  p[1] = h2_bits(__hfma2(bits_h2((w & 0x00F000F0u) | 0x64006400u), k1_16, km64));
  p[2] = h2_bits(__hsub2(bits_h2((w8 & 0x000F000Fu) | 0x64006400u), k1024));
  p[3] = h2_bits(__hfma2(bits_h2((w8 & 0x00F000F0u) | 0x64006400u), k1_16, km64));
}

// Codes (0,2), (1,3) of an 8-bit word as fp16 pairs (1024 + q, exact, minus 1024).
__device__ __forceinline__ void unpack8(uint32_t w, uint32_t (&p)[2]) {
  const __half2 k1024 = bits_h2(0x64006400u);
  p[0] = h2_bits(__hsub2(bits_h2((w & 0x00FF00FFu) | 0x64006400u), k1024));
  p[1] = h2_bits(__hsub2(bits_h2(((w >> 8) & 0x00FF00FFu) | 0x64006400u), k1024));
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A value and its rounding remainder as fp16: v = hi + lo to 22 bits.
__device__ __forceinline__ void split_pair(float v0, float v1, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(v0, v1);
  const float2 back = __half22float2(h);
  hi = h2_bits(h);
  lo = h2_bits(__floats2half2_rn(v0 - back.x, v1 - back.y));
}

// What a warp loads for one k-tile.
template <int kBits, int kMT, int kFolds>
struct TileLoads {
  static constexpr int kPerLane = kTileBytes * 8 / kBits / 32;  // activations each lane converts
  uint4 code[kMT][2][2];        // [m-tile][row g, g+8][two 16-byte halves of the run]
  uint32_t s[kMT][2][kFolds];   // raw scale and bias bits, converted where they are used (converting
                                // at the load measured 3% slower over a 9B decode step: 344 against
                                // 355 tok/s on one H100)
  uint32_t b[kMT][2][kFolds];
  float4 x[kPerLane / 4];
  float4 gate[kPerLane / 4];    // SwiGLU: the gate half of x
};

template <typename S>
__device__ __forceinline__ uint32_t load_raw(const S* p) {
  if constexpr (sizeof(S) == 4) {
    return __float_as_uint(*reinterpret_cast<const float*>(p));
  } else {
    return *reinterpret_cast<const unsigned short*>(p);
  }
}
template <typename S>
__device__ __forceinline__ float raw_to_float(uint32_t r) {
  if constexpr (sizeof(S) == 4) {
    return __uint_as_float(r);
  } else {
    const unsigned short h = static_cast<unsigned short>(r);
    return scale_to_float(*reinterpret_cast<const S*>(&h));
  }
}

// kMT: m-tiles (16 rows) per warp. kFolds: group folds per run (2 only for 4-bit groups of 32).
// kGlu: x = SiLU(gate) ⊙ up is formed as the activations are read (the MLP's down projection).
template <int kBits, int kMT, int kFolds, bool kGlu, typename S>
__global__ void __launch_bounds__(32 * kMaxWarps, 2)
    gemv_tc_kernel(const float* __restrict__ x, const float* __restrict__ gate, const WeightSegments segs, int64_t K,
                   int group_size) {
  constexpr int kTileK = kTileBytes * 8 / kBits;      // weights per row per tile
  constexpr int kRun = kTileK / 4;                    // codes per lane per row per tile
  constexpr int kWords = kRun * kBits / 32;           // 32-bit words per run (8)
  constexpr int kPerLane = kTileK / 32;               // activations each lane converts (8 or 4)
  constexpr int kFoldWords = kWords / kFolds;
  constexpr int kFoldLanes = 8 / kFolds;              // converting lanes per fold segment
  constexpr int kRows = 16 * kMT;
  using Loads = TileLoads<kBits, kMT, kFolds>;

  const WeightSegment& seg = block_segment(segs);
  const uint8_t* codes = static_cast<const uint8_t*>(seg.codes);
  const int64_t N = seg.n;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x - seg.first_block) * kRows;
  if (row0 >= N) return;  // uniform across the block

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int64_t row_bytes = K * kBits / 8, groups = K / group_size;
  const int64_t tiles = row_bytes / kTileBytes;
  const S* __restrict__ scales = static_cast<const S*>(seg.scales);
  const S* __restrict__ biases = static_cast<const S*>(seg.biases);

  // Rows this lane loads: (m-tile, g or g+8); rows past N re-read the last row and are never stored.
  int64_t rows[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) rows[mt][h] = min(row0 + mt * 16 + g + 8 * h, N - 1);

  auto load = [&](int64_t t, Loads& l) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* p = codes + rows[mt][h] * row_bytes + t * kTileBytes + c * 32;
        l.code[mt][h][0] = load_stream(p);
        l.code[mt][h][1] = load_stream(p + 16);
#pragma unroll
        for (int f = 0; f < kFolds; ++f) {
          const int64_t gi = rows[mt][h] * groups + (t * kTileK + c * kRun + f * (kRun / kFolds)) / group_size;
          l.s[mt][h][f] = load_raw(scales + gi);
          l.b[mt][h][f] = load_raw(biases + gi);
        }
      }
    const float4* xp = reinterpret_cast<const float4*>(x + t * kTileK + lane * kPerLane);
#pragma unroll
    for (int i = 0; i < kPerLane / 4; ++i) l.x[i] = xp[i];
    if constexpr (kGlu) {
      const float4* gp = reinterpret_cast<const float4*>(gate + t * kTileK + lane * kPerLane);
#pragma unroll
      for (int i = 0; i < kPerLane / 4; ++i) l.gate[i] = gp[i];
    }
  };

  // (Prefetching this warp's first tiles into L2 before the wait, or later tiles a few ahead inside
  // the loop, measured no faster on an H100.)
  wait_for_inputs();

  // B operand: lane (n = g, k-slots of c) is nonzero only where column pair n/2 is c's own run;
  // column n even carries hi, odd lo.
  const bool b_active = (g / 2) == c;
  const int b_part = g % 2;

  __shared__ uint4 b_shared[kMaxWarps][2][32];  // [warp][hi/lo][converting lane]
  float acc[kMT][2] = {};

  for (int64_t t = warp; t < tiles; t += warps) {
    // Issued first so their latency overlaps the conversion below. (Loading the next tile here
    // instead, a tile ahead, measured slower on an H100: the registers it holds cost occupancy.)
    Loads cur;
    load(t, cur);

    // Convert this tile's activations: lane u takes kPerLane consecutive ones (run u/8, word u%8).
    float v[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane / 4; ++i) {
      v[4 * i] = cur.x[i].x, v[4 * i + 1] = cur.x[i].y, v[4 * i + 2] = cur.x[i].z, v[4 * i + 3] = cur.x[i].w;
      if constexpr (kGlu) {
        // SiLU(gate) · up, as the silu_mul op computes it.
        const float gv[4] = {cur.gate[i].x, cur.gate[i].y, cur.gate[i].z, cur.gate[i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) v[4 * i + j] = gv[j] / (1.0f + expf(-gv[j])) * v[4 * i + j];
      }
    }
    float amax = 0.0f, sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) amax = fmaxf(amax, fabsf(v[i])), sum += v[i];
#pragma unroll
    for (int o = 1; o < 8; o *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
#pragma unroll
    for (int o = 1; o < kFoldLanes; o *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    // Power-of-two scale from amax's exponent (0 for inf/NaN, which then propagate).
    const int e_bits = (__float_as_int(amax) >> 23) & 0xFF;
    const int e = e_bits == 0xFF ? 0 : max(-100, min(100, kTargetExp + 127 - e_bits));
    const float up = __int_as_float((127 + e) << 23), down = __int_as_float((127 - e) << 23);
    uint32_t hi[kPerLane / 2], lo[kPerLane / 2];
    if constexpr (kBits == 4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) split_pair(v[j] * up, v[j + 4] * up, hi[j], lo[j]);
      b_shared[warp][0][lane] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      b_shared[warp][1][lane] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 2; ++j) split_pair(v[j] * up, v[j + 2] * up, hi[j], lo[j]);
      b_shared[warp][0][lane] = make_uint4(hi[0], hi[1], 0u, 0u);
      b_shared[warp][1][lane] = make_uint4(lo[0], lo[1], 0u, 0u);
    }
    __syncwarp();
    // What lane c's folds need from the lanes that converted run c.
    const float run_down = __shfl_sync(0xffffffffu, down, 8 * c);
    float run_sum[kFolds];
#pragma unroll
    for (int f = 0; f < kFolds; ++f) run_sum[f] = __shfl_sync(0xffffffffu, sum, 8 * c + f * kFoldLanes);

#pragma unroll
    for (int f = 0; f < kFolds; ++f) {
      float d[kMT][4] = {};
#pragma unroll
      for (int m = f * kFoldWords; m < (f + 1) * kFoldWords; ++m) {
        const uint4 bv = b_active ? b_shared[warp][b_part][8 * c + m] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          const uint32_t wa = (&cur.code[mt][0][m / 4].x)[m % 4], wb = (&cur.code[mt][1][m / 4].x)[m % 4];
          if constexpr (kBits == 4) {
            uint32_t pa[4], pb[4];
            unpack4(wa, pa);
            unpack4(wb, pb);
            mma16816(d[mt], pa[0], pb[0], pa[1], pb[1], bv.x, bv.y);
            mma16816(d[mt], pa[2], pb[2], pa[3], pb[3], bv.z, bv.w);
          } else {
            uint32_t pa[2], pb[2];
            unpack8(wa, pa);
            unpack8(wb, pb);
            mma16816(d[mt], pa[0], pb[0], pa[1], pb[1], bv.x, bv.y);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          acc[mt][h] += (d[mt][2 * h] + d[mt][2 * h + 1]) * (raw_to_float<S>(cur.s[mt][h][f]) * run_down) +
                        raw_to_float<S>(cur.b[mt][h][f]) * run_sum[f];
    }
    __syncwarp();  // b_shared is rewritten by the next tile
  }

  // Sum the four runs (lanes c = 0..3 of a row), then the warps, in a fixed order.
  __shared__ float partial[kMaxWarps][kRows];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float r = acc[mt][h];
      r += __shfl_xor_sync(0xffffffffu, r, 1);
      r += __shfl_xor_sync(0xffffffffu, r, 2);
      if (c == 0) partial[warp][mt * 16 + g + 8 * h] = r;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows; i += blockDim.x) {
    if (row0 + i >= N) continue;
    float r = 0.0f;
    for (int w = 0; w < warps; ++w) r += partial[w][i];
    seg.out[row0 + i] = r;
  }
}

template <int kBits, int kMT, int kFolds, bool kGlu, typename S>
void launch_gemv(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x, const float* gate,
            int64_t K) {
  constexpr int kRows = 16 * kMT;
  WeightSegments segs;
  const unsigned blocks = make_segments(ws, outs, kRows, segs);
  // Warps per block split k. Enough of them to fill the GPU in one wave, each with at least two
  // tiles, so a short matrix still keeps every SM streaming; a tall one (the lm_head) uses one.
  // (On an H100, 8 warps and two m-tiles for every matrix from 4096 rows were 5-15% faster per
  // matmul in bench_cuda_gemv, yet the whole 9B decode step ran 5-7% slower with them.)
  static const int64_t resident_warps = [] {
    int per_sm = 0;
    STRATA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, gemv_tc_kernel<kBits, kMT, kFolds, kGlu, S>, 32 * kMaxWarps, 0));
    int device = 0, sms = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&device));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return static_cast<int64_t>(std::max(per_sm, 1)) * kMaxWarps * sms;
  }();
  const int64_t tiles = K * kBits / 8 / kTileBytes;
  int warps = kMaxWarps;
  while (warps > 1 && (static_cast<int64_t>(blocks) * warps > resident_warps || tiles < 2 * warps)) warps /= 2;
  launch(gemv_tc_kernel<kBits, kMT, kFolds, kGlu, S>, blocks, 32 * warps, 0, x, gate, segs, K, ws[0]->group_size);
}

template <int kBits, int kFolds, typename S>
void launch_tiles(std::span<const Weight* const> ws, std::span<float* const> outs, const float* x, const float* gate,
                  int64_t K) {
  int64_t rows = 0;
  for (const Weight* w : ws) rows += w->rows();
  // Two m-tiles per warp halve the activation work per weight byte; short matrices keep one so
  // that enough blocks exist to fill the GPU.
  if (gate != nullptr) {
    launch_gemv<kBits, 1, kFolds, true, S>(ws, outs, x, gate, K);  // the down projection: short and wide
  } else if (rows >= 8192) {
    launch_gemv<kBits, 2, kFolds, false, S>(ws, outs, x, nullptr, K);
  } else {
    launch_gemv<kBits, 1, kFolds, false, S>(ws, outs, x, nullptr, K);
  }
}

}  // namespace

bool gemv_tc_supported(const Weight& w) {
  if (!w.quantized() || (w.bits != 4 && w.bits != 8)) return false;
  if (w.group_size != 32 && w.group_size != 64 && w.group_size != 128) return false;
  const int64_t row_bytes = w.cols() * w.bits / 8;
  if (row_bytes % kTileBytes != 0) return false;
  const DType st = w.scales.dtype;
  return st == DType::kF32 || st == DType::kBF16 || st == DType::kF16;
}

void gemv_tc(const float* x, const float* gate, std::span<const Weight* const> ws, std::span<float* const> outs) {
  if (ws.empty() || ws.size() > static_cast<size_t>(kMaxSegments)) throw_internal_error("gemv_tc: 1 to 4 weights");
  const Weight& w0 = *ws[0];
  const int64_t K = w0.cols();
  with_scale_type(w0, [&](auto s) {
    using S = decltype(s);
    if (w0.bits == 4) {
      if (w0.group_size == 32) {
        launch_tiles<4, 2, S>(ws, outs, x, gate, K);
      } else {
        launch_tiles<4, 1, S>(ws, outs, x, gate, K);
      }
    } else {
      launch_tiles<8, 1, S>(ws, outs, x, gate, K);
    }
  });
}

}  // namespace strata::backend::cuda
