// CPU elementwise ops: embedding lookup, bias, RMSNorm, SwiGLU, residual add, row copies.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace strata::backend::cpu {

void embedding(const Weight& table, std::span<const int32_t> ids, const Tensor& out) {
  const int64_t H = table.cols();
  float* dst = out.as<float>();
  for (size_t t = 0; t < ids.size(); ++t) {
    if (table.quantized()) {
      dequantize_rows(table, ids[t], 1, dst + t * H);
    } else {
      check(table.w.dtype == DType::kF32, ErrorKind::kInternal, "CPU embedding expects F32");
      std::memcpy(dst + t * H, table.w.as<const float>() + static_cast<int64_t>(ids[t]) * H, H * sizeof(float));
    }
  }
}

void add_bias(const Tensor& x, const Tensor& bias) {
  const int64_t N = bias.numel();
  const int64_t rows = x.numel() / N;
  float* p = x.as<float>();
  const float* b = bias.as<const float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < N; ++i) p[r * N + i] += b[i];
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out) {
  const int64_t D = w.numel();
  const int64_t rows = x.numel() / D;
  const float* src = x.as<const float>();
  const float* wt = w.as<const float>();
  float* dst = out.as<float>();
#pragma omp parallel for schedule(static) if (rows >= 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = src + r * D;
    float ss = 0.0f;
    for (int64_t i = 0; i < D; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
    float* o = dst + r * D;
    for (int64_t i = 0; i < D; ++i) o[i] = (xr[i] * inv) * (one_plus_w ? 1.0f + wt[i] : wt[i]);
  }
}

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out) {
  const int64_t D = w.numel(), rows = x.numel() / D, normed = out.numel() / D;
  add(x, delta);
  rms_norm(x.reshaped({rows, D}).rows(rows - normed, rows), w, eps, one_plus_w, out);
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t n = gate.numel();
  const float* g = gate.as<const float>();
  const float* u = up.as<const float>();
  float* o = out.as<float>();
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void add(const Tensor& a, const Tensor& b) {
  const int64_t n = a.numel();
  float* pa = a.as<float>();
  const float* pb = b.as<const float>();
  for (int64_t i = 0; i < n; ++i) pa[i] += pb[i];
}

void store_rows(const Tensor& src, std::span<const int32_t> positions, const Tensor& dst) {
  const size_t row_bytes = src.nbytes() / static_cast<size_t>(src.dim(0));
  for (size_t t = 0; t < positions.size(); ++t)
    std::memcpy(static_cast<char*>(dst.data) + row_bytes * static_cast<size_t>(positions[t]),
                static_cast<const char*>(src.data) + row_bytes * t, row_bytes);
}

void argmax(const Tensor& x, const Tensor& out) {
  const int64_t V = x.dim(-1), rows = x.numel() / V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.as<const float>() + r * V;
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (row[i] > row[best]) best = i;
    out.as<int32_t>()[r] = static_cast<int32_t>(best);
  }
}

// The reference draw: the candidates sorted into the draw's order, the cuts taken from its prefix,
// and the kept tokens walked in id order (row_draw.h states the rules; the CUDA kernel selects
// instead of sorting).
void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out) {
  const float* row = x.as<const float>();
  const int64_t V = x.numel();
  struct Candidate {
    float v;
    int32_t id;
    float w;     // e^(v − max v)
    uint64_t W;  // its integer weight
  };
  std::vector<Candidate> c;
  c.reserve(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(row[i]) && row[i] != -std::numeric_limits<float>::infinity())
      c.push_back({row[i] / draw.temperature, static_cast<int32_t>(i), 0.0f, 0});
  int32_t& token = out.as<int32_t>()[0];
  token = -1;
  if (c.empty()) return;
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return row_draw::order_key(a.v, a.id) > row_draw::order_key(b.v, b.id);
  });
  const float max_v = c.front().v;
  for (Candidate& e : c) e.w = row_draw::weight(e.v, max_v), e.W = row_draw::fixed_weight(e.w);
  auto mass = [&](size_t n) {
    uint64_t m = 0;
    for (size_t i = 0; i < n; ++i) m += c[i].W;
    return m;
  };
  // The first i + 1 candidates are the shortest prefix whose running ΣW reaches target.
  auto reaching = [&](size_t n, uint64_t target) {
    uint64_t run = 0;
    for (size_t i = 0; i < n; ++i)
      if ((run += c[i].W) >= target) return i + 1;
    return n;
  };
  size_t n = c.size();
  if (draw.top_k > 0 && static_cast<size_t>(draw.top_k) < n) n = static_cast<size_t>(draw.top_k);
  if (draw.top_p < 1.0f) n = reaching(n, row_draw::reach_target(draw.top_p, mass(n)));
  if (draw.min_p > 0.0f)
    while (n > 1 && c[n - 1].w < draw.min_p) --n;
  const uint64_t target = row_draw::reach_target(draw.u, mass(n));
  c.resize(n);
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  token = c[reaching(n, target) - 1].id;  // the kept tokens in id order
}

void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties) {
  float* row = x.as<float>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    float& l = row[ids.as<const int32_t>()[i]];
    l = edited_logit(l, biases.as<const float>()[i], counts.as<const int32_t>()[i], penalties);
  }
}

void mask_logits(const Tensor& x, const Tensor& mask) {
  float* row = x.as<float>();
  const uint32_t* bits = mask.as<const uint32_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!((bits[i >> 5] >> (i & 31)) & 1u)) row[i] = -std::numeric_limits<float>::infinity();
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) {
  const int64_t n = x.numel();
  const float* px = x.as<const float>();
  const float* pg = gate.as<const float>();
  float* o = out.as<float>();
  for (int64_t i = 0; i < n; ++i) o[i] = px[i] / (1.0f + std::exp(-pg[i]));
}

void split_columns(const Tensor& x, std::span<const Tensor> outs) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  const size_t es = dtype_size(x.dtype);
  const char* src = static_cast<const char*>(x.data);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t col = 0;
    for (const Tensor& o : outs) {
      const int64_t w = o.dim(1);
      std::memcpy(static_cast<char*>(o.data) + r * w * es, src + (r * width + col) * es, w * es);
      col += w;
    }
  }
}

}  // namespace strata::backend::cpu
