// CPU rotary embedding, the q/k preparation before attention, and causal grouped-query attention
// over a KV cache (F32, or BF16 widened to fp32 as it is read).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"

namespace strata::backend::cpu {

namespace {

// Rows t of src (F32 [T, ...]) into rows rows[t] of cache, rounded to BF16 where the cache is.
void store_cache_rows(const Tensor& src, std::span<const int32_t> rows, const Tensor& cache) {
  if (cache.dtype == DType::kF32) {
    store_rows(src, rows, cache);
    return;
  }
  const int64_t width = src.numel() / src.dim(0);
  for (size_t t = 0; t < rows.size(); ++t) {
    const float* from = src.as<const float>() + static_cast<int64_t>(t) * width;
    uint16_t* to = cache.as<uint16_t>() + static_cast<int64_t>(rows[t]) * width;
    for (int64_t i = 0; i < width; ++i) to[i] = f32_to_bf16(from[i]);
  }
}

// One KV head's rows of a cache as fp32: an F32 cache's own rows, a BF16 cache's widened into the
// caller's scratch. Both dtypes then run one compiled copy of the loops in attend(), so a BF16
// cache gives exactly what the F32 cache of its values gives, however the compiler vectorizes them
// (as template instances they differed on an AVX-512 machine: products rounded before the sum in
// one, fused in the other).
struct CacheRows {
  const Tensor& cache;
  std::span<const int32_t> rows;  // of the sequence's tokens
  int64_t kv_head;

  const float* row(int64_t key, float* scratch) const {
    const int64_t Hkv = cache.dim(1), D = cache.dim(2);
    const int64_t at = (int64_t{rows[static_cast<size_t>(key)]} * Hkv + kv_head) * D;
    if (cache.dtype == DType::kF32) return cache.as<const float>() + at;
    const uint16_t* r = cache.as<const uint16_t>() + at;
    for (int64_t d = 0; d < D; ++d) scratch[d] = bf16_to_f32(r[d]);
    return scratch;
  }
};

void attend(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
            std::span<const int32_t> positions, std::span<const int32_t> rows, size_t capacity_tokens,
            float scale, int64_t window, const Tensor& out) {
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2);
  // Scratch for every key the sequence may have, so that it does not grow as the sequence fills.
  const auto capacity = static_cast<int64_t>(std::max(rows.size(), capacity_tokens));
  const int64_t group = Hq / k_cache.dim(1);
  const float* qp = q.as<const float>();
  float* op = out.as<float>();
#pragma omp parallel
  {
    static thread_local std::vector<float> scores, acc, row;  // grow-only, per thread
    acc.resize(D);
    row.resize(D);
    scores.reserve(static_cast<size_t>(capacity));  // every key: no growth as the sequence fills
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t pos = positions[t];
        const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
        const int64_t n = pos - first + 1;
        const CacheRows keys{k_cache, rows, h / group}, values{v_cache, rows, h / group};
        const float* qv = qp + (t * Hq + h) * D;
        scores.resize(n);
        float max_s = -INFINITY;
        for (int64_t s = 0; s < n; ++s) {
          const float* kv = keys.row(first + s, row.data());
          float dotv = 0.0f;
          for (int64_t d = 0; d < D; ++d) dotv += qv[d] * kv[d];
          scores[s] = dotv * scale;
          max_s = std::max(max_s, scores[s]);
        }
        float sum = 0.0f;
        for (int64_t s = 0; s < n; ++s) {
          scores[s] = std::exp(scores[s] - max_s);
          sum += scores[s];
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t s = 0; s < n; ++s) {
          const float p = scores[s] / sum;
          const float* vv = values.row(first + s, row.data());
          for (int64_t d = 0; d < D; ++d) acc[d] += p * vv[d];
        }
        std::copy(acc.begin(), acc.end(), op + (t * Hq + h) * D);
      }
    }
  }
}

}  // namespace

void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) {
  const int64_t T = x.dim(0), H = x.dim(1), D = x.dim(2);
  const int half = params.rotary_dim / 2;
  float* data = x.as<float>();
  // Grow-only per-thread scratch: the decode loop allocates nothing after its first step.
  static thread_local std::vector<float> cos_t, sin_t;
  cos_t.resize(half);
  sin_t.resize(half);
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      // float32 angle, as transformers computes it (inv_freq · position in fp32)
      const float angle = static_cast<float>(positions[t]) * params.inv_freq[i];
      cos_t[i] = std::cos(angle) * params.attention_factor;
      sin_t[i] = std::sin(angle) * params.attention_factor;
    }
    for (int64_t h = 0; h < H; ++h) {
      float* v = data + (t * H + h) * D;
      for (int i = 0; i < half; ++i) {
        const int a = params.neox ? i : 2 * i;
        const int b = params.neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cos_t[i] - x1 * sin_t[i];
        v[b] = x1 * cos_t[i] + x0 * sin_t[i];
      }
    }
  }
}

// The composition the fused op replaces, op by op, so that it computes exactly what they did.
void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, std::span<const int32_t> positions,
                        std::span<const int32_t> rows, const Tensor& q_out, const Tensor& gate_out,
                        const Tensor& k_cache, const Tensor& v_cache) {
  const int64_t T = q_out.dim(0), Hq = q_out.dim(1), D = q_out.dim(2);
  if (q.dim(2) == 2 * D) {
    const Tensor parts[] = {q_out.reshaped({T * Hq, D}), gate_out.reshaped({T * Hq, D})};
    split_columns(q.reshaped({T * Hq, 2 * D}), parts);
  } else if (q_out.data != q.data) {
    std::memcpy(q_out.data, q.data, q.nbytes());
  }
  if (!norm.q_w.empty()) {
    rms_norm(q_out, norm.q_w, norm.eps, norm.one_plus_w, q_out);
    rms_norm(k, norm.k_w, norm.eps, norm.one_plus_w, k);
  }
  rope(q_out, positions, rope_params);
  rope(k, positions, rope_params);
  store_cache_rows(k, rows, k_cache);
  store_cache_rows(v, rows, v_cache);
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               std::span<const int32_t> rows, int64_t capacity, float scale, int64_t window,
               const Tensor& out) {
  attend(q, k_cache, v_cache, positions, rows, static_cast<size_t>(capacity), scale, window, out);
}

}  // namespace strata::backend::cpu
