// CPU matmul: float weights through a few-row kernel up to kFloatRowsMax rows (each weight row read once for all
// of them, and each output summed in one fixed order, so that a row's result never depends on the rows
// beside it) and OpenBLAS sgemm beyond; MLX-quantized weights either through a fused
// dequantize-dot kernel (few rows of x, the decode case) or by dequantizing row blocks and calling
// sgemm (prefill). Both compute Σ (s·q + b)·x = s·Σ q·x + b·Σ x per group.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed codes are read as little-endian bytes");

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "formats/mlx_quant.h"

namespace strata::backend::cpu {

namespace {

constexpr int64_t kFusedMaxRows = 8;      // up to this many x rows use the fused quantized kernel
constexpr int64_t kDequantBlock = 256;    // weight rows dequantized per sgemm call

// Unpacks the codes of one group (gs values starting at column `col0`) as floats.
inline void unpack_group(const uint32_t* row, int64_t col0, int gs, int bits, float* q) {
  if (bits == 4) {
    const uint32_t* p = row + col0 / 8;
    for (int j = 0; j < gs / 8; ++j) {
      const uint32_t w = p[j];
      for (int k = 0; k < 8; ++k) q[j * 8 + k] = static_cast<float>((w >> (4 * k)) & 0xf);
    }
  } else if (bits == 8) {
    const uint32_t* p = row + col0 / 4;
    for (int j = 0; j < gs / 4; ++j) {
      const uint32_t w = p[j];
      for (int k = 0; k < 4; ++k) q[j * 4 + k] = static_cast<float>((w >> (8 * k)) & 0xff);
    }
  } else if (bits == 2) {
    const uint32_t* p = row + col0 / 16;
    for (int j = 0; j < gs / 16; ++j) {
      const uint32_t w = p[j];
      for (int k = 0; k < 16; ++k) q[j * 16 + k] = static_cast<float>((w >> (2 * k)) & 0x3);
    }
  } else {
    for (int j = 0; j < gs; ++j) q[j] = static_cast<float>(formats::unpack_code(row, col0 + j, bits));
  }
}

inline float dot(const float* a, const float* b, int n) {
  // 16 independent partial sums so the compiler vectorises without reassociating.
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += a[i + k] * b[i + k];
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float v : acc) s += v;
  return s;
}

// The fused kernels keep 16 lanes per x row across all groups of a weight row (acc += s · Σ q·x
// lane by lane) and reduce them once per row, instead of once per group.
constexpr int kLanes = 16;

// 8-bit codes are whole bytes, element j = byte j (LSB-first stream on a little-endian host).
inline void dot_u8_acc(const uint8_t* q, const float* x, int n, float s, float* acc) {
  float part[kLanes] = {};
  for (int i = 0; i < n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) part[k] += static_cast<float>(q[i + k]) * x[i + k];
  for (int k = 0; k < kLanes; ++k) acc[k] += s * part[k];
}

// 4-bit codes: byte j holds elements 2j (low nibble) and 2j+1 (high). xp is x permuted per block of
// 32 (even elements, then odd ones) so both halves read x contiguously.
inline void dot_u4_acc(const uint8_t* q, const float* xp, int n, float s, float* acc) {
  float part[kLanes] = {};
  for (int i = 0; i < n; i += 32) {
    const uint8_t* b = q + i / 2;
    for (int k = 0; k < kLanes; ++k)
      part[k] += static_cast<float>(b[k] & 0xf) * xp[i + k] + static_cast<float>(b[k] >> 4) * xp[i + 16 + k];
  }
  for (int k = 0; k < kLanes; ++k) acc[k] += s * part[k];
}

void permute_for_u4(const float* x, int64_t n, float* xp) {
  for (int64_t base = 0; base < n; base += 32)
    for (int k = 0; k < 16; ++k) {
      xp[base + k] = x[base + 2 * k];
      xp[base + 16 + k] = x[base + 2 * k + 1];
    }
}

// Few-row float matmul: out[t][n] = Σ_k w[n][k] · x[t][k] for R weight rows and T x rows at a
// time. Every output keeps its own 16 lanes and sums them in one fixed order, so neither R nor T
// changes a single bit of it: a decode batch gives each sequence the numbers it gets alone.
// 8 floats as one value (one AVX2 register); two of them are the 16 lanes of `dot`.
typedef float Lanes8 __attribute__((vector_size(8 * sizeof(float))));

inline Lanes8 load8(const float* p) {
  Lanes8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int R, int T>
void float_rows_block(const float* w, int64_t K, const float* x, float* out, int64_t N) {
  Lanes8 acc[R][T][2] = {};
  int64_t i = 0;
  for (; i + kLanes <= K; i += kLanes)
    for (int h = 0; h < 2; ++h) {
      Lanes8 wv[R], xv[T];
      for (int r = 0; r < R; ++r) wv[r] = load8(w + r * K + i + 8 * h);
      for (int t = 0; t < T; ++t) xv[t] = load8(x + t * K + i + 8 * h);
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t][h] += wv[r] * xv[t];
    }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float s = 0.0f;
      for (int64_t j = i; j < K; ++j) s += w[r * K + j] * x[t * K + j];
      // The lanes summed as a tree (16 → 8 → 4 → 2 → 1), not one after another: with a small K
      // a chain of 16 dependent adds would cost more than the products.
      const Lanes8 a = acc[r][t][0] + acc[r][t][1];
      const float b0 = a[0] + a[4], b1 = a[1] + a[5], b2 = a[2] + a[6], b3 = a[3] + a[7];
      out[t * N + r] = s + ((b0 + b2) + (b1 + b3));
    }
}

// One block of outputs: R weight rows by c (1 to 4) x rows, as float_rows_block<R, c>.
template <int R>
void float_rows_chunk(const float* w, int64_t K, const float* x, int64_t c, float* out, int64_t N) {
  switch (c) {
    case 1: return float_rows_block<R, 1>(w, K, x, out, N);
    case 2: return float_rows_block<R, 2>(w, K, x, out, N);
    case 3: return float_rows_block<R, 3>(w, K, x, out, N);
    default: return float_rows_block<R, 4>(w, K, x, out, N);
  }
}

// x rows are taken at most 4 at a time against each block of weight rows (which stays in the
// cache meanwhile), and a block is 4 weight rows for one x row, 2 for two, else 1: the
// accumulators fit 16 AVX2 registers, and a one-row step still has independent sums to hide the
// FMA latency behind.
void matmul_float_rows(const float* x, int64_t T, const float* w, int64_t N, int64_t K, float* out) {
  check(T >= 1 && T <= kFloatRowsMax, ErrorKind::kInternal, "few-row float matmul takes 1 to {} rows, got {}",
        kFloatRowsMax, T);
  const int64_t R = T == 1 ? 4 : T == 2 ? 2 : 1;
  const int64_t blocks = (N + R - 1) / R;
#pragma omp parallel for schedule(static) if (N * K >= (1 << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n = b * R;
    for (int64_t t0 = 0; t0 < T; t0 += 4) {
      const int64_t c = std::min<int64_t>(4, T - t0);
      const float* xt = x + t0 * K;
      float* ot = out + t0 * N;
      if (n + R > N || R == 1) {
        for (int64_t m = n; m < std::min(n + R, N); ++m) float_rows_chunk<1>(w + m * K, K, xt, c, ot + m, N);
      } else if (R == 4) {
        float_rows_block<4, 1>(w + n * K, K, xt, ot + n, N);
      } else {
        float_rows_block<2, 2>(w + n * K, K, xt, ot + n, N);
      }
    }
  }
}

void check_quantized(const Weight& w) {
  check(w.scales.dtype == DType::kF32 && w.biases.dtype == DType::kF32, ErrorKind::kInternal,
        "CPU quantized matmul expects F32 scales and biases");
  check(w.cols() % w.group_size == 0, ErrorKind::kInternal, "quantized cols {} not a multiple of {}",
        w.cols(), w.group_size);
}

void matmul_quantized_fused(const float* x, int64_t T, const Weight& w, float* out) {
  const int64_t N = w.rows(), K = w.cols();
  const int gs = w.group_size, bits = w.bits;
  const int64_t G = K / gs;
  const int64_t words_per_row = w.w.dim(1);
  static thread_local std::vector<float> xsum, xp;  // grow-only: decode allocates nothing after warm-up
  xsum.resize(static_cast<size_t>(T * G));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g) {
      float s = 0.0f;
      for (int j = 0; j < gs; ++j) s += x[t * K + g * gs + j];
      xsum[t * G + g] = s;
    }
  if (bits == 4) {
    xp.resize(static_cast<size_t>(T * K));
    for (int64_t t = 0; t < T; ++t) permute_for_u4(x + t * K, K, xp.data() + t * K);
  }
  const auto* codes = w.w.as<const uint32_t>();
  const auto* scales = w.scales.as<const float>();
  const auto* biases = w.biases.as<const float>();
  // The scratch is this thread's: the team reads it through these pointers (in the region, the
  // names would be each worker's own, empty, thread_local vectors).
  const float* x_sums = xsum.data();
  const float* x_perm = xp.data();
  // Small matrices (tiny models) are not worth waking the other threads for.
#pragma omp parallel if (N * K >= (1 << 16))
  {
    float q[128];
    float lanes[kFusedMaxRows][kLanes];
    float bias_acc[kFusedMaxRows];
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t* row = codes + n * words_per_row;
      const auto* bytes = reinterpret_cast<const uint8_t*>(row);
      for (int64_t t = 0; t < T; ++t) {
        std::fill(lanes[t], lanes[t] + kLanes, 0.0f);
        bias_acc[t] = 0.0f;
      }
      for (int64_t g = 0; g < G; ++g) {
        const float s = scales[n * G + g], b = biases[n * G + g];
        for (int64_t t = 0; t < T; ++t) bias_acc[t] += b * x_sums[t * G + g];
        if (bits == 8 && gs % kLanes == 0) {
          for (int64_t t = 0; t < T; ++t) dot_u8_acc(bytes + g * gs, x + t * K + g * gs, gs, s, lanes[t]);
        } else if (bits == 4 && gs % 32 == 0) {
          for (int64_t t = 0; t < T; ++t)
            dot_u4_acc(bytes + g * gs / 2, x_perm + t * K + g * gs, gs, s, lanes[t]);
        } else {
          unpack_group(row, g * gs, gs, bits, q);
          for (int64_t t = 0; t < T; ++t) lanes[t][0] += s * dot(q, x + t * K + g * gs, gs);
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        float sum = bias_acc[t];
        for (float v : lanes[t]) sum += v;
        out[t * N + n] = sum;
      }
    }
  }
}

void matmul_quantized_blocked(const float* x, int64_t T, const Weight& w, float* out) {
  const int64_t N = w.rows(), K = w.cols();
  // Reused, not allocated per call: megabytes each prompt matmul would otherwise map anew.
  static thread_local std::vector<float> block;
  block.resize(static_cast<size_t>(std::min(N, kDequantBlock) * K));
  for (int64_t n0 = 0; n0 < N; n0 += kDequantBlock) {
    const int64_t nb = std::min(kDequantBlock, N - n0);
    dequantize_rows(w, n0, nb, block.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(nb),
                static_cast<int>(K), 1.0f, x, static_cast<int>(K), block.data(), static_cast<int>(K), 0.0f,
                out + n0, static_cast<int>(N));
  }
}

}  // namespace

void dequantize_rows(const Weight& w, int64_t row0, int64_t n, float* dst) {
  check_quantized(w);
  const int64_t K = w.cols();
  const int gs = w.group_size;
  const int64_t G = K / gs;
  const int64_t words_per_row = w.w.dim(1);
  const auto* codes = w.w.as<const uint32_t>();
  const auto* scales = w.scales.as<const float>();
  const auto* biases = w.biases.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const int64_t row = row0 + r;
    float* d = dst + r * K;
    for (int64_t g = 0; g < G; ++g) {
      unpack_group(codes + row * words_per_row, g * gs, gs, w.bits, d + g * gs);
      const float s = scales[row * G + g], b = biases[row * G + g];
      for (int j = 0; j < gs; ++j) d[g * gs + j] = s * d[g * gs + j] + b;
    }
  }
}

void matmul(const Tensor& x, const Weight& w, const Tensor& out) {
  const int64_t K = x.dim(-1);
  const int64_t T = x.numel() / K;
  const int64_t N = w.rows();
  if (T == 0) return;
  if (!w.quantized()) {
    check(w.w.dtype == DType::kF32, ErrorKind::kInternal, "CPU matmul expects F32 weights, got {}",
          dtype_name(w.w.dtype));
    if (T <= kFloatRowsMax) {
      // Not sgemm, whose blocking would depend on T.
      matmul_float_rows(x.as<const float>(), T, w.w.as<const float>(), N, K, out.as<float>());
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(N),
                  static_cast<int>(K), 1.0f, x.as<const float>(), static_cast<int>(K), w.w.as<const float>(),
                  static_cast<int>(K), 0.0f, out.as<float>(), static_cast<int>(N));
    }
    return;
  }
  check_quantized(w);
  check(w.group_size <= 128, ErrorKind::kUnsupported, "group size {} > 128", w.group_size);
  if (T <= kFusedMaxRows) {
    matmul_quantized_fused(x.as<const float>(), T, w, out.as<float>());
  } else {
    matmul_quantized_blocked(x.as<const float>(), T, w, out.as<float>());
  }
}

}  // namespace strata::backend::cpu
