// The gated delta rule over a prompt in the chunked (WY/UT) form of MODEL_SPEC §1.7, for key heads
// of 128 (every Qwen3.5 shape). The row-parallel recurrence (gdn.cu) walks all T tokens one after
// another; here only the state's hand-over from one 64-token chunk to the next is sequential, and
// each chunk is a few small matrix products on tensor cores.
//
// Two launches:
//  1. prepare, one block per (chunk, value head), all in parallel: γ (the chunk's cumulative log
//     decay), K Kᵀ and Q Kᵀ, A = β (K Kᵀ) ⊙ e^(γ_i − γ_s) strictly below the diagonal, then
//     W = (I + A)⁻¹ diag(β e^γ) K and U = (I + A)⁻¹ diag(β) V by forward substitution (one column
//     a thread), and P = (Q Kᵀ) ⊙ e^(γ_i − γ_s) on and below the diagonal. W, U, P and γ go to a
//     workspace.
//  2. state, one block per (value head, 32 rows of its state), walking the chunks in order with its
//     state slice in shared memory: V' = U − W S, O = e^γ ⊙ (Q S) + P V', S ← e^(γ_L) S + (K ⊙ e^(γ_L − γ))ᵀ V'.
//
// Precision. The products run as mma.sync m16n8k8 on TF32 with each fp32 operand split into a TF32
// high part and a TF32 remainder (a·b ≈ a_hi·b_hi + a_hi·b_lo + a_lo·b_hi, fp32 sums): about fp32
// accuracy at a third of the tensor-core rate. The forward substitution and every scalar step are
// plain fp32. The CPU reference is backend/cpu/gdn.cpp (delta_chunked_head).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gdn_common.h"
#include "backend/cuda/launch.h"

namespace strata::backend::cuda {

namespace {

constexpr int kChunk = 64;          // tokens per chunk, as the CPU's chunked form
constexpr int kDk = 128;            // key head dim these kernels take
constexpr int kPitch = kDk + 4;     // shared row pitch in floats: consecutive rows 4 banks apart
constexpr int kVecs = kDk / 4;      // float4 per key row
constexpr int kAPitch = kChunk + 4;    // P: rows read as mma A
constexpr int kATPitch = kChunk + 8;   // A stored transposed: read down its columns (mma A)
constexpr int kSlice = 32;             // state rows (value dims) per block of the state kernel
constexpr int kThreads = 256;
constexpr int kXPitch = kThreads + 8;  // the substitution's columns, read down them (mma B)

// Where the prepare kernel leaves its results for the state kernel (floats, in the workspace).
struct ChunkScratch {
  float* w;      // [T, Hv, dk]
  float* u;      // [T, Hv, dv]
  float* p;      // [chunks, Hv, 64, 64]
  float* gamma;  // [T, Hv]: γ within the token's chunk
};

size_t scratch_floats(int64_t T, int64_t Hv, int64_t dv) {
  const int64_t chunks = (T + kChunk - 1) / kChunk;
  return static_cast<size_t>(T * Hv * kDk + T * Hv * dv + chunks * Hv * kChunk * kChunk + T * Hv);
}

ChunkScratch carve(float* base, int64_t T, int64_t Hv, int64_t dv) {
  ChunkScratch s{};
  s.w = base;
  s.u = s.w + T * Hv * kDk;
  s.p = s.u + T * Hv * dv;
  s.gamma = s.p + (T + kChunk - 1) / kChunk * Hv * kChunk * kChunk;
  return s;
}

// ---- 3×TF32 warp products (m16n8k8; g = lane / 4, c = lane % 4) ----

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// An operand fragment split into TF32 high parts and remainders.
template <int N>
struct Split {
  uint32_t hi[N], lo[N];
  __device__ __forceinline__ explicit Split(const float (&x)[N]) {
#pragma unroll
    for (int e = 0; e < N; ++e) hi[e] = to_tf32(x[e]), lo[e] = to_tf32(x[e] - __uint_as_float(hi[e]));
  }
};

// d += A·B for one 16×8 tile and 8 of k, to about fp32 accuracy (the small terms first).
__device__ __forceinline__ void mma3(float (&d)[4], const Split<4>& a, const Split<2>& b) {
  mma_tf32(d, a.lo, b.hi);
  mma_tf32(d, a.hi, b.lo);
  mma_tf32(d, a.hi, b.hi);
}

// The A fragment of rows m0.., k-columns k0.. of a row-major matrix (A[m][k] at base[m·P + k]).
template <int P>
__device__ __forceinline__ Split<4> a_rows(const float* base, int m0, int k0) {
  const int g = threadIdx.x % 32 / 4, c = threadIdx.x % 4;
  const float a[4] = {base[(m0 + g) * P + k0 + c], base[(m0 + g + 8) * P + k0 + c], base[(m0 + g) * P + k0 + c + 4],
                      base[(m0 + g + 8) * P + k0 + c + 4]};
  return Split<4>(a);
}

// The A fragment of a matrix stored transposed (A[m][k] at base[k·P + m]), each k-row scaled.
template <int P>
__device__ __forceinline__ Split<4> a_cols(const float* base, int m0, int k0, float scale_c, float scale_c4) {
  const int g = threadIdx.x % 32 / 4, c = threadIdx.x % 4;
  const float a[4] = {base[(k0 + c) * P + m0 + g] * scale_c, base[(k0 + c) * P + m0 + g + 8] * scale_c,
                      base[(k0 + c + 4) * P + m0 + g] * scale_c4, base[(k0 + c + 4) * P + m0 + g + 8] * scale_c4};
  return Split<4>(a);
}

// The B fragment of k-rows k0.., columns n0.. of B stored by columns (B[k][n] at base[n·P + k]).
template <int P>
__device__ __forceinline__ Split<2> b_cols(const float* base, int k0, int n0) {
  const int g = threadIdx.x % 32 / 4, c = threadIdx.x % 4;
  const float b[2] = {base[(n0 + g) * P + k0 + c], base[(n0 + g) * P + k0 + c + 4]};
  return Split<2>(b);
}

// The same, B stored by rows (B[k][n] at base[k·P + n]).
template <int P>
__device__ __forceinline__ Split<2> b_rows(const float* base, int k0, int n0) {
  const int g = threadIdx.x % 32 / 4, c = threadIdx.x % 4;
  const float b[2] = {base[(k0 + c) * P + n0 + g], base[(k0 + c + 4) * P + n0 + g]};
  return Split<2>(b);
}

// Starts copying rows [c0, c0 + L) of a [T, H, kDk] tensor's head h into shared rows of pitch P;
// rows from L to the chunk's end become zero.
template <int P>
__device__ void load_rows(const float* __restrict__ src, int64_t c0, int L, int H, int h, float* dst) {
#pragma unroll
  for (int e = threadIdx.x; e < kChunk * kVecs; e += kThreads) {
    const int i = e / kVecs, c = e % kVecs;
    copy_async16(dst + i * P + 4 * c, src + ((c0 + min(i, L - 1)) * H + h) * kDk + 4 * c, i < L ? 16 : 0);
  }
}

// ---- 1. prepare ----

__global__ void __launch_bounds__(kThreads, 2)
    chunk_prepare_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                         const float* __restrict__ g, const float* __restrict__ beta, int T, int Hk, int Hv, int dv,
                         ChunkScratch out) {
  extern __shared__ float4 smem4[];
  float* ks = reinterpret_cast<float*>(smem4);  // [64][kPitch]
  float* qs = ks + kChunk * kPitch;             // [64][kPitch]
  float* as = qs + kChunk * kPitch;             // [64][kATPitch], transposed: A[i, s] at [s][i]
  float* xs = ks;  // [64][kXPitch]: the columns of W, then of U, once K and Q are read
  static_assert(kChunk * kXPitch <= 2 * kChunk * kPitch, "X fits where K and Q were");
  __shared__ float gam[kChunk], bet[kChunk], graw[kChunk], wscale[kChunk];
  const int chunk = blockIdx.x, j = blockIdx.y, kh = j / (Hv / Hk);
  const int64_t c0 = static_cast<int64_t>(chunk) * kChunk;
  const int L = min(kChunk, T - static_cast<int>(c0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lg = lane / 4, lc = lane % 4;
  wait_for_inputs();

  load_rows<kPitch>(k, c0, L, Hk, kh, ks);
  load_rows<kPitch>(q, c0, L, Hk, kh, qs);
  if (threadIdx.x < kChunk) {
    const int i = threadIdx.x;
    graw[i] = i < L ? g[(c0 + i) * Hv + j] : 0.0f;
    bet[i] = i < L ? beta[(c0 + i) * Hv + j] : 0.0f;  // rows past L add nothing
  }
  copy_async_wait_all();
  __syncthreads();
  if (threadIdx.x == 0) {  // γ summed as the CPU sums it; rows past L carry the last γ
    float acc = 0.0f;
    for (int i = 0; i < kChunk; ++i) gam[i] = acc += graw[i];
  }
  __syncthreads();
  if (threadIdx.x < kChunk) wscale[threadIdx.x] = bet[threadIdx.x] * expf(gam[threadIdx.x]);  // read after a barrier

  // K Kᵀ and Q Kᵀ: warp w takes rows 16·(w % 4).. and columns 32·(w / 4)..; tiles wholly above
  // the diagonal stay zero.
  const int mi = warp % 4, n0 = 32 * (warp / 4);
  float kk[4][4] = {}, qk[4][4] = {};
  for (int k0 = 0; k0 < kDk; k0 += 8) {
    const Split<4> ak = a_rows<kPitch>(ks, 16 * mi, k0), aq = a_rows<kPitch>(qs, 16 * mi, k0);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (n0 + 8 * t > 16 * mi + 15) continue;  // warp-uniform
      const Split<2> b = b_cols<kPitch>(ks, k0, n0 + 8 * t);
      mma3(kk[t], ak, b);
      mma3(qk[t], aq, b);
    }
  }
  float* p = out.p + (static_cast<int64_t>(chunk) * Hv + j) * kChunk * kChunk;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 16 * mi + lg + 8 * (e / 2), s = n0 + 8 * t + 2 * lc + e % 2;
      const float decay = s <= i ? expf(gam[i] - gam[s]) : 0.0f;
      as[s * kATPitch + i] = s < i ? bet[i] * kk[t][e] * decay : 0.0f;
      p[i * kChunk + s] = s <= i ? qk[t][e] * decay : 0.0f;
    }
  }
  if (threadIdx.x < L) out.gamma[(c0 + threadIdx.x) * Hv + j] = gam[threadIdx.x];
  __syncthreads();

  // X = (I + A)⁻¹ B by blocks of 16 rows, B's columns < kDk from β e^γ K (W), the rest from β V
  // (U): X_b = (I + A_bb)⁻¹ (B_b − A_b,<b X_<b), the product on tensor cores, the 16-row solve one
  // column a thread.
  const int col = threadIdx.x;  // kDk + dv ≤ kThreads
  const bool is_w = col < kDk, has_col = col < kDk + dv;
  {
    float x[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      x[i] = !has_col ? 0.0f
             : is_w   ? wscale[i] * ks[i * kPitch + col]
                      : (i < L ? bet[i] * v[((c0 + i) * Hv + j) * dv + (col - kDk)] : 0.0f);
    }
    __syncthreads();  // K and Q are read: X takes their place
    if (has_col) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) xs[i * kXPitch + col] = x[i];
    }
  }
  __syncthreads();
  const int n_cols = kDk + dv;
  for (int b = 0; b < kChunk / 16; ++b) {
    if (b > 0) {
      float acc[4][4] = {};
      for (int k0 = 0; k0 < 16 * b; k0 += 8) {
        const Split<4> a = a_cols<kATPitch>(as, 16 * b, k0, 1.0f, 1.0f);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          if (32 * warp + 8 * t < n_cols) mma3(acc[t], a, b_rows<kXPitch>(xs, k0, 32 * warp + 8 * t));
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (32 * warp + 8 * t >= n_cols) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) xs[(16 * b + lg + 8 * (e / 2)) * kXPitch + 32 * warp + 8 * t + 2 * lc + e % 2] -= acc[t][e];
      }
      __syncthreads();
    }
    if (has_col) {
      float x[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) x[i] = xs[(16 * b + i) * kXPitch + col];
#pragma unroll
      for (int s = 0; s < 15; ++s) {
#pragma unroll
        for (int i = s + 1; i < 16; ++i) x[i] = fmaf(-as[(16 * b + s) * kATPitch + 16 * b + i], x[s], x[i]);
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) xs[(16 * b + i) * kXPitch + col] = x[i];
    }
    __syncthreads();
  }
  if (has_col) {
#pragma unroll 8
    for (int i = 0; i < L; ++i) {
      if (is_w) {
        out.w[((c0 + i) * Hv + j) * kDk + col] = xs[i * kXPitch + col];
      } else {
        out.u[((c0 + i) * Hv + j) * dv + (col - kDk)] = xs[i * kXPitch + col];
      }
    }
  }
}

// ---- 2. state ----

constexpr int kKPitch = kDk + 8;     // K is read down its columns (A of the state update)
constexpr int kVPitch = kSlice + 8;  // V' and U: rows of 32, read down their columns (B)

// The second half of a chunk's inputs (K, P, γ) has two slots: the next chunk's loads while this
// one's are read.
struct StateLayout {
  static constexpr int kW = 0;                              // [64][kPitch]
  static constexpr int kQ = kW + kChunk * kPitch;           // [64][kPitch]
  static constexpr int kS = kQ + kChunk * kPitch;           // [kSlice][kPitch]: S rows r0.. of the head
  static constexpr int kU = kS + kSlice * kPitch;           // [64][kVPitch]
  static constexpr int kV = kU + kChunk * kVPitch;          // [64][kVPitch]: V'
  static constexpr int kK = kV + kChunk * kVPitch;          // [2][64][kKPitch]
  static constexpr int kP = kK + 2 * kChunk * kKPitch;      // [2][64][kAPitch]
  static constexpr int kGamma = kP + 2 * kChunk * kAPitch;  // [2][64]
  static constexpr int kFloats = kGamma + 2 * kChunk;
  static_assert(kS % 4 == 0 && kQ % 4 == 0 && kK % 4 == 0 && kU % 4 == 0 && kP % 4 == 0, "16-byte rows");
};

__global__ void __launch_bounds__(kThreads)
    chunk_state_kernel(const float* __restrict__ q, const float* __restrict__ k, ChunkScratch in, float* state,
                       float* __restrict__ out, int T, int Hk, int Hv, int dv) {
  using Ly = StateLayout;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float *ws = sm + Ly::kW, *qs = sm + Ly::kQ, *ss = sm + Ly::kS, *us = sm + Ly::kU, *vs = sm + Ly::kV;
  const int j = blockIdx.x, r0 = blockIdx.y * kSlice, kh = j / (Hv / Hk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lg = lane / 4, lc = lane % 4;
  float* srows = state + (static_cast<int64_t>(j) * dv + r0) * kDk;

  // The state slice is read before the wait: only this layer's previous call wrote it, and that
  // kernel has completed (launch.h).
  for (int e = threadIdx.x; e < kSlice * kVecs; e += kThreads) {
    const int r = e / kVecs, c = e % kVecs;
    reinterpret_cast<float4*>(ss + r * kPitch)[c] = reinterpret_cast<const float4*>(srows + r * kDk)[c];
  }
  wait_for_inputs();

  const int chunks = (T + kChunk - 1) / kChunk;
  // The first half of a chunk's inputs (W, Q, U) is read only by the first phase, so the next
  // chunk's first half loads while this one finishes; the second half (K, P, γ) into its slot.
  auto load_first_half = [&](int chunk) {
    const int64_t c0 = static_cast<int64_t>(chunk) * kChunk;
    const int L = min(kChunk, T - static_cast<int>(c0));
    load_rows<kPitch>(in.w, c0, L, Hv, j, ws);
    load_rows<kPitch>(q, c0, L, Hk, kh, qs);
#pragma unroll
    for (int e = threadIdx.x; e < kChunk * kSlice / 4; e += kThreads) {
      const int i = e / (kSlice / 4), c = e % (kSlice / 4);
      copy_async16(us + i * kVPitch + 4 * c, in.u + ((c0 + min(i, L - 1)) * Hv + j) * dv + r0 + 4 * c,
                   i < L ? 16 : 0);
    }
  };
  auto load_second_half = [&](int chunk) {
    const int64_t c0 = static_cast<int64_t>(chunk) * kChunk;
    const int L = min(kChunk, T - static_cast<int>(c0)), slot = chunk & 1;
    load_rows<kKPitch>(k, c0, L, Hk, kh, sm + Ly::kK + slot * kChunk * kKPitch);
    const float* p = in.p + (static_cast<int64_t>(chunk) * Hv + j) * kChunk * kChunk;
    float* ps = sm + Ly::kP + slot * kChunk * kAPitch;
#pragma unroll
    for (int e = threadIdx.x; e < kChunk * kChunk / 4; e += kThreads) {
      const int i = e / (kChunk / 4), c = e % (kChunk / 4);
      copy_async16(ps + i * kAPitch + 4 * c, p + i * kChunk + 4 * c);
    }
    // Rows past L take the last token's γ.
    if (threadIdx.x < kChunk) {
      copy_async4(sm + Ly::kGamma + slot * kChunk + threadIdx.x,
                  in.gamma + (c0 + min(static_cast<int>(threadIdx.x), L - 1)) * Hv + j);
    }
  };
  // V', O: warp w takes rows 16·(w % 4).. and state rows (columns) 16·(w / 4)..
  const int mi = warp % 4, n0 = 16 * (warp / 4);
  load_first_half(0);
  load_second_half(0);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int64_t c0 = static_cast<int64_t>(chunk) * kChunk;
    const int L = min(kChunk, T - static_cast<int>(c0)), slot = chunk & 1;
    const float* ks = sm + Ly::kK + slot * kChunk * kKPitch;
    const float* ps = sm + Ly::kP + slot * kChunk * kAPitch;
    const float* gam = sm + Ly::kGamma + slot * kChunk;
    copy_async_wait_all();
    __syncthreads();
    if (chunk + 1 < chunks) load_second_half(chunk + 1);  // its slot was last read by chunk − 1

    // W Sᵀ and Q Sᵀ over the incoming state (B[x][r] = S[r][x]).
    float wsum[2][4] = {}, osum[2][4] = {};
    for (int k0 = 0; k0 < kDk; k0 += 8) {
      const Split<4> aw = a_rows<kPitch>(ws, 16 * mi, k0), aq = a_rows<kPitch>(qs, 16 * mi, k0);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const Split<2> b = b_cols<kPitch>(ss, k0, n0 + 8 * t);
        mma3(wsum[t], aw, b);
        mma3(osum[t], aq, b);
      }
    }
    // V' = U − W Sᵀ; O starts as e^γ (Q Sᵀ).
    const float eg_lo = expf(gam[16 * mi + lg]), eg_hi = expf(gam[16 * mi + lg + 8]);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * mi + lg + 8 * (e / 2), r = n0 + 8 * t + 2 * lc + e % 2;
        vs[i * kVPitch + r] = us[i * kVPitch + r] - wsum[t][e];
        osum[t][e] *= e / 2 == 0 ? eg_lo : eg_hi;
      }
    }
    __syncthreads();
    if (chunk + 1 < chunks) load_first_half(chunk + 1);

    // O += P V' (P is zero above the diagonal: k runs to the warp's last row).
    for (int k0 = 0; k0 < 16 * mi + 16; k0 += 8) {
      const Split<4> a = a_rows<kAPitch>(ps, 16 * mi, k0);
#pragma unroll
      for (int t = 0; t < 2; ++t) mma3(osum[t], a, b_rows<kVPitch>(vs, k0, n0 + 8 * t));
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 16 * mi + lg + 8 * h, r = n0 + 8 * t + 2 * lc;
        if (i < L) {
          *reinterpret_cast<float2*>(out + ((c0 + i) * Hv + j) * dv + r0 + r) =
              make_float2(osum[t][2 * h], osum[t][2 * h + 1]);
        }
      }
    }

    // Sᵀ ← e^(γ_L) Sᵀ + (K ⊙ e^(γ_L − γ))ᵀ V': warp w takes key dims 16w.., every state row.
    const float gl = gam[kChunk - 1];  // γ_L: padded rows carry the last token's γ
    const float el = expf(gl);
    float st[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) st[t][e] = ss[(8 * t + 2 * lc + e % 2) * kPitch + 16 * warp + lg + 8 * (e / 2)] * el;
    }
    for (int k0 = 0; k0 < L; k0 += 8) {
      const Split<4> a =
          a_cols<kKPitch>(ks, 16 * warp, k0, expf(gl - gam[k0 + lc]), expf(gl - gam[k0 + lc + 4]));
#pragma unroll
      for (int t = 0; t < 4; ++t) mma3(st[t], a, b_rows<kVPitch>(vs, k0, 8 * t));
    }
    // A warp rewrites only the key dims it read (the first phase's reads ended at the barrier).
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) ss[(8 * t + 2 * lc + e % 2) * kPitch + 16 * warp + lg + 8 * (e / 2)] = st[t][e];
    }
  }
  __syncthreads();

  for (int e = threadIdx.x; e < kSlice * kVecs; e += kThreads) {
    const int r = e / kVecs, c = e % kVecs;
    reinterpret_cast<float4*>(srows + r * kDk)[c] = reinterpret_cast<const float4*>(ss + r * kPitch)[c];
  }
}

}  // namespace

bool delta_rule_chunked_supported(int64_t dk, int64_t dv) {
  return dk == kDk && dv % kSlice == 0 && dv <= kThreads - kDk;
}

void delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                        float* state, float* out, int T, int Hk, int Hv, int dv) {
  constexpr size_t kPrepareSmem = sizeof(float) * (2 * kChunk * kPitch + kChunk * kATPitch);
  constexpr size_t kStateSmem = sizeof(float) * StateLayout::kFloats;
  static const bool raised = [] {  // once, on the first (eager) call
    allow_shared_bytes(chunk_prepare_kernel, kPrepareSmem);
    allow_shared_bytes(chunk_state_kernel, kStateSmem);
    return true;
  }();
  (void)raised;
  const ChunkScratch scratch = carve(
      static_cast<float*>(workspace(WorkspaceSlot::kDeltaRule, sizeof(float) * scratch_floats(T, Hv, dv))), T, Hv, dv);
  const unsigned chunks = static_cast<unsigned>((T + kChunk - 1) / kChunk);
  launch(chunk_prepare_kernel, dim3(chunks, static_cast<unsigned>(Hv)), kThreads, kPrepareSmem, q, k, v, g, beta, T,
         Hk, Hv, dv, scratch);
  launch(chunk_state_kernel, dim3(static_cast<unsigned>(Hv), static_cast<unsigned>(dv / kSlice)), kThreads, kStateSmem,
         q, k, scratch, state, out, T, Hk, Hv, dv);
}

}  // namespace strata::backend::cuda
