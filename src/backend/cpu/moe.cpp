// CPU mixture-of-experts ops: fp32 router softmax with top-k, row gather/scatter, the routed experts,
// gated shared expert.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace strata::backend::cpu {

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last) {
  const int64_t T = logits.dim(0), L = logits.dim(1), E = L - (shared_last ? 1 : 0), slots = ids.dim(1);
  const float* pl = logits.as<const float>();
  int32_t* pi = ids.as<int32_t>();
  float* pw = weights.as<float>();
  static thread_local std::vector<float> p;  // grow-only scratch
  static thread_local std::vector<int32_t> order;
  p.resize(static_cast<size_t>(E));
  order.resize(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = pl + t * L;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float top = 0.0f;
    for (int64_t i = 0; i < k; ++i) top += p[order[i]];
    for (int64_t i = 0; i < k; ++i) {
      pi[t * slots + i] = order[i];
      pw[t * slots + i] = renormalize ? p[order[i]] / top : p[order[i]];
    }
    if (shared_last) {
      pi[t * slots + k] = static_cast<int32_t>(E);
      pw[t * slots + k] = sigmoid(l[E]);
    }
  }
}

void gather_rows(const Tensor& src, std::span<const int32_t> rows, const Tensor& out) {
  const int64_t C = src.dim(-1);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.as<float>() + i * C, src.as<const float>() + rows[i] * C, C * sizeof(float));
}

void scatter_add_rows(const Tensor& src, std::span<const int32_t> rows, std::span<const float> scale,
                      const Tensor& dst) {
  const int64_t C = src.dim(-1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const float* s = src.as<const float>() + i * C;
    float* d = dst.as<float>() + rows[i] * C;
    for (int64_t c = 0; c < C; ++c) d[c] += scale[i] * s[c];
  }
}

void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const Weight> gate,
                 std::span<const Weight> up, std::span<const Weight> down, const Tensor& out) {
  const int64_t T = x.dim(0), H = x.dim(1), k = ids.dim(1), E = static_cast<int64_t>(gate.size());
  const int64_t I = gate[0].rows();
  // Each expert runs once, on the rows of the tokens routed to it (one matmul of all of them), and
  // adds weight · its output to theirs; experts in ascending id, so a token's terms add in that
  // order. Grow-only scratch: a decode step allocates nothing after warm-up.
  static thread_local std::vector<std::vector<int32_t>> rows;  // per expert: its tokens
  static thread_local std::vector<std::vector<float>> scales;  // and their routing weights
  static thread_local std::vector<float> scratch;
  rows.resize(static_cast<size_t>(E));
  scales.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) rows[static_cast<size_t>(e)].clear(), scales[static_cast<size_t>(e)].clear();
  const int32_t* pid = ids.as<const int32_t>();
  const float* pw = weights.as<const float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = pid[t * k + i];
      if (e < 0 || e >= E) continue;  // no expert (a NaN router row): adds nothing
      rows[static_cast<size_t>(e)].push_back(static_cast<int32_t>(t));
      scales[static_cast<size_t>(e)].push_back(pw[t * k + i]);
    }
  std::fill(out.as<float>(), out.as<float>() + T * H, 0.0f);
  const auto view = [](float* p, int64_t a, int64_t b) { return Tensor{p, DType::kF32, Shape{a, b}, Device::kCpu}; };
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int32_t>& r = rows[static_cast<size_t>(e)];
    if (r.empty()) continue;
    const int64_t n = static_cast<int64_t>(r.size());
    scratch.resize(static_cast<size_t>(n * (2 * H + 2 * I)));
    float* p = scratch.data();
    const Tensor xe = view(p, n, H), g = view(p + n * H, n, I), u = view(p + n * (H + I), n, I),
                 y = view(p + n * (H + 2 * I), n, H);
    cpu::gather_rows(x, r, xe);
    cpu::matmul(xe, gate[static_cast<size_t>(e)], g);
    cpu::matmul(xe, up[static_cast<size_t>(e)], u);
    cpu::silu_mul(g, u, g);
    cpu::matmul(g, down[static_cast<size_t>(e)], y);
    cpu::scatter_add_rows(y, r, scales[static_cast<size_t>(e)], out);
  }
}

void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate) {
  const int64_t rows = gate.numel(), C = x.numel() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float s = sigmoid(gate.as<const float>()[r]);
    float* px = x.as<float>() + r * C;
    const float* py = y.as<const float>() + r * C;
    for (int64_t c = 0; c < C; ++c) px[c] += s * py[c];
  }
}

}  // namespace strata::backend::cpu
