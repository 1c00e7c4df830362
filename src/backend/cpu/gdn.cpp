// CPU Gated DeltaNet ops: the readable reference for the CUDA kernels. The recurrent form updates
// one [dv, dk] state row at a time (decode: no allocation); the chunked form follows
// MODEL_SPEC.md §1.7 with 64-token chunks, one value head per OpenMP task.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace strata::backend::cpu {

namespace {

constexpr int64_t kChunk = 64;

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

struct DeltaDims {
  int64_t T, Hk, Hv, dk, dv;
};

// One value head, token by token. S: [dv, dk].
void delta_recurrent_head(const DeltaDims& d, int64_t j, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* S, float* out) {
  const int64_t kh = j / (d.Hv / d.Hk);
  for (int64_t t = 0; t < d.T; ++t) {
    const float* qt = q + (t * d.Hk + kh) * d.dk;
    const float* kt = k + (t * d.Hk + kh) * d.dk;
    const float* vt = v + (t * d.Hv + j) * d.dv;
    const float alpha = std::exp(g[t * d.Hv + j]);
    const float b = beta[t * d.Hv + j];
    float* ot = out + (t * d.Hv + j) * d.dv;
    for (int64_t r = 0; r < d.dv; ++r) {  // row r of S is column r of the [dk, dv] state
      float* row = S + r * d.dk;
      for (int64_t i = 0; i < d.dk; ++i) row[i] *= alpha;
      const float delta = b * (vt[r] - dot(row, kt, d.dk));
      axpy(row, kt, delta, d.dk);
      ot[r] = dot(row, qt, d.dk);
    }
  }
}

// One value head in chunks: W = T·diag(β e^γ)·K and U = T·diag(β)·V with T = (I + A)⁻¹ by forward
// substitution; V' = U − W S; O = e^γ Q S + (QKᵀ ⊙ Γ ⊙ M) V'; S ← e^γ_L S + (K ⊙ e^(γ_L − γ))ᵀ V'.
void delta_chunked_head(const DeltaDims& d, int64_t j, const float* q, const float* k, const float* v,
                        const float* g, const float* beta, float* S, float* out) {
  const int64_t kh = j / (d.Hv / d.Hk);
  const int64_t dk = d.dk, dv = d.dv;
  std::vector<float> K(kChunk * dk), Q(kChunk * dk), W(kChunk * dk), U(kChunk * dv), A(kChunk * kChunk);
  std::vector<float> gam(kChunk), bet(kChunk);
  for (int64_t c0 = 0; c0 < d.T; c0 += kChunk) {
    const int64_t L = std::min(kChunk, d.T - c0);
    float acc = 0.0f;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t t = c0 + i;
      std::memcpy(&K[i * dk], k + (t * d.Hk + kh) * dk, dk * sizeof(float));
      std::memcpy(&Q[i * dk], q + (t * d.Hk + kh) * dk, dk * sizeof(float));
      acc += g[t * d.Hv + j];
      gam[i] = acc;
      bet[i] = beta[t * d.Hv + j];
    }
    // A[i, s] = β_i (k_i·k_s) e^(γ_i − γ_s), s < i; then forward substitution for W and U.
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t s = 0; s < i; ++s) A[i * kChunk + s] = bet[i] * dot(&K[i * dk], &K[s * dk], dk) * std::exp(gam[i] - gam[s]);
      float* wi = &W[i * dk];
      float* ui = &U[i * dv];
      const float* vi = v + ((c0 + i) * d.Hv + j) * dv;
      const float wb = bet[i] * std::exp(gam[i]);
      for (int64_t x = 0; x < dk; ++x) wi[x] = wb * K[i * dk + x];
      for (int64_t x = 0; x < dv; ++x) ui[x] = bet[i] * vi[x];
      for (int64_t s = 0; s < i; ++s) {
        const float a = A[i * kChunk + s];
        axpy(wi, &W[s * dk], -a, dk);
        axpy(ui, &U[s * dv], -a, dv);
      }
    }
    // V' = U − W S (in place in U); the inter-chunk part of O uses the incoming state.
    for (int64_t i = 0; i < L; ++i) {
      float* ui = &U[i * dv];
      float* oi = out + ((c0 + i) * d.Hv + j) * dv;
      const float eg = std::exp(gam[i]);
      for (int64_t r = 0; r < dv; ++r) {
        const float* row = S + r * dk;
        ui[r] -= dot(&W[i * dk], row, dk);
        oi[r] = eg * dot(&Q[i * dk], row, dk);
      }
    }
    // Intra-chunk part: o_i += Σ_{s≤i} (q_i·k_s) e^(γ_i − γ_s) v'_s.
    for (int64_t i = 0; i < L; ++i) {
      float* oi = out + ((c0 + i) * d.Hv + j) * dv;
      for (int64_t s = 0; s <= i; ++s)
        axpy(oi, &U[s * dv], dot(&Q[i * dk], &K[s * dk], dk) * std::exp(gam[i] - gam[s]), dv);
    }
    // Next state.
    const float gl = gam[L - 1];
    const float el = std::exp(gl);
    for (int64_t i = 0; i < L; ++i) {
      const float f = std::exp(gl - gam[i]);
      for (int64_t x = 0; x < dk; ++x) K[i * dk + x] *= f;
    }
    for (int64_t r = 0; r < dv; ++r) {
      float* row = S + r * dk;
      for (int64_t x = 0; x < dk; ++x) row[x] *= el;
      for (int64_t i = 0; i < L; ++i) axpy(row, &K[i * dk], U[i * dv + r], dk);
    }
  }
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& window, const Tensor& out) {
  const int64_t T = x.dim(0), C = x.dim(1), K = weight.dim(1);
  const float* xs = x.as<const float>();
  const float* w = weight.as<const float>();
  float* win = window.as<float>();
  float* o = out.as<float>();
  // Row r of the virtual sequence [window; x], r in [0, K-1+T).
  auto row = [&](int64_t r) { return r < K - 1 ? win + r * C : xs + (r - (K - 1)) * C; };
#pragma omp parallel for schedule(static) if (T * C >= 65536)
  for (int64_t t = 0; t < T; ++t) {
    float* ot = o + t * C;
    for (int64_t c = 0; c < C; ++c) {
      float s = 0.0f;
      for (int64_t j = 0; j < K; ++j) s += w[c * K + j] * row(t + j)[c];
      ot[c] = silu(s);
    }
  }
  // Advance the window to the last K-1 rows of [window; x].
  const int64_t keep = std::max<int64_t>(0, (K - 1) - T);  // old rows that stay
  if (keep > 0) std::memmove(win, win + (K - 1 - keep) * C, keep * C * sizeof(float));
  const int64_t fresh = K - 1 - keep;
  std::memcpy(win + keep * C, xs + (T - fresh) * C, fresh * C * sizeof(float));
}

void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta) {
  const int64_t Hv = a_log.numel(), rows = a.numel() / Hv;
  const float* pa = a.as<const float>();
  const float* pb = b.as<const float>();
  const float* al = a_log.as<const float>();
  const float* dt = dt_bias.as<const float>();
  float* pg = g.as<float>();
  float* pbeta = beta.as<float>();
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < Hv; ++j) {
      const int64_t i = t * Hv + j;
      pbeta[i] = sigmoid(pb[i]);
      pg[i] = -std::exp(al[j]) * softplus(pa[i] + dt[j]);
    }
}

void l2_norm(const Tensor& x, float eps, float scale, const Tensor& out) {
  const int64_t D = x.dim(-1), rows = x.numel() / D;
  const float* src = x.as<const float>();
  float* dst = out.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = src + r * D;
    const float f = scale / std::sqrt(dot(xr, xr, D) + eps);
    for (int64_t i = 0; i < D; ++i) dst[r * D + i] = xr[i] * f;
  }
}

// The composition the fused op replaces, op by op, so that it computes exactly what they did.
void gdn_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                 const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, float l2_eps, float q_scale,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta) {
  const int64_t T = qkv.dim(0), C = qkv.dim(1);
  // Grow-only per-thread scratch for the conv output: decode allocates nothing after its first step.
  static thread_local std::vector<float> conv_out;
  conv_out.resize(static_cast<size_t>(T * C));
  const Tensor u{conv_out.data(), DType::kF32, {T, C}, Device::kCpu};
  causal_conv1d_silu(qkv, conv_weight, window, u);
  const int64_t Hk = q.dim(1), dk = q.dim(2);
  const Tensor parts[] = {q.reshaped({T, Hk * dk}), k.reshaped({T, Hk * dk}), v.reshaped({T, v.dim(1) * v.dim(2)})};
  split_columns(u, parts);
  l2_norm(q, l2_eps, q_scale, q);
  l2_norm(k, l2_eps, 1.0f, k);
  gdn_gates(a, b, a_log, dt_bias, g, beta);
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const Tensor& out, DeltaRuleForm form) {
  const DeltaDims d{q.dim(0), q.dim(1), v.dim(1), q.dim(2), v.dim(2)};
  const float* pq = q.as<const float>();
  const float* pk = k.as<const float>();
  const float* pv = v.as<const float>();
  const float* pg = g.as<const float>();
  const float* pb = beta.as<const float>();
  float* S = state.as<float>();
  float* o = out.as<float>();
#pragma omp parallel for schedule(dynamic) if (d.Hv * d.T * d.dk * d.dv >= 262144)
  for (int64_t j = 0; j < d.Hv; ++j) {
    float* Sj = S + j * d.dv * d.dk;
    if (form == DeltaRuleForm::kChunked) {
      delta_chunked_head(d, j, pq, pk, pv, pg, pb, Sj, o);
    } else {
      delta_recurrent_head(d, j, pq, pk, pv, pg, pb, Sj, o);
    }
  }
}

void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& out) {
  const int64_t D = w.numel(), rows = x.numel() / D;
  const float* px = x.as<const float>();
  const float* pz = z.as<const float>();
  const float* pw = w.as<const float>();
  float* po = out.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * D;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, D) / static_cast<float>(D) + eps);
    for (int64_t i = 0; i < D; ++i) po[r * D + i] = xr[i] * inv * pw[i] * silu(pz[r * D + i]);
  }
}

}  // namespace strata::backend::cpu
