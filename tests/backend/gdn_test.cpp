// Gated DeltaNet and MoE CPU ops. The chunked delta rule (prefill) against the recurrent one
// (decode) for lengths around the 64-token chunk and for a prefill that continues from a state;
// the recurrent rule against a float64 transcription of MODEL_SPEC.md §1.5; the conv window, gates,
// gated norm and router against direct formulas.
//
// Tolerance chunked vs recurrent: 2e-5 max |Δ| on outputs and states of O(1) (fp32 rounding only;
// the two forms sum in different orders).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/gdn.h"
#include "backend/moe.h"
#include "core/error.h"

namespace strata {
namespace {

using backend::DeltaRuleForm;

constexpr float kFormTolerance = 2e-5f;

struct DeltaInputs {
  HostTensor q, k, v, g, beta;
};

// Random inputs shaped like a GDN layer: Hk=2 key heads shared by Hv=4 value heads, unit-norm q/k
// (q scaled by dk^-0.5), decays α = exp(g) in (0.33, 0.98), β in (0, 1).
DeltaInputs random_inputs(int64_t T, uint32_t seed, int64_t Hk = 2, int64_t Hv = 4, int64_t dk = 16, int64_t dv = 24) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  DeltaInputs in{HostTensor(DType::kF32, {T, Hk, dk}), HostTensor(DType::kF32, {T, Hk, dk}),
                 HostTensor(DType::kF32, {T, Hv, dv}), HostTensor(DType::kF32, {T, Hv}),
                 HostTensor(DType::kF32, {T, Hv})};
  for (int64_t i = 0; i < in.v.numel(); ++i) in.v.as<float>()[i] = n(rng);
  for (HostTensor* x : {&in.q, &in.k})
    for (int64_t i = 0; i < x->numel(); ++i) x->as<float>()[i] = n(rng);
  backend::l2_norm(in.q, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)), in.q);
  backend::l2_norm(in.k, 1e-6f, 1.0f, in.k);
  for (int64_t i = 0; i < in.g.numel(); ++i) {
    in.g.as<float>()[i] = -0.02f * std::exp(4.0f * u(rng));
    in.beta.as<float>()[i] = u(rng);
  }
  return in;
}

HostTensor random_state(int64_t Hv, int64_t dv, int64_t dk, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.5f);
  HostTensor s(DType::kF32, {Hv, dv, dk});
  for (int64_t i = 0; i < s.numel(); ++i) s.as<float>()[i] = n(rng);
  return s;
}

HostTensor clone(const HostTensor& t) {
  HostTensor c(t.dtype(), t.shape());
  std::memcpy(c.as<void>(), t.as<void>(), t.view().nbytes());
  return c;
}

float max_diff(const HostTensor& a, const HostTensor& b) {
  float m = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.as<float>()[i] - b.as<float>()[i]));
  return m;
}

void run(const DeltaInputs& in, const HostTensor& state, const HostTensor& out, DeltaRuleForm form) {
  backend::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, state, out, form);
}

class DeltaRuleForms : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeltaRuleForms, ChunkedMatchesRecurrentOutputsAndFinalState) {
  const int64_t T = GetParam();
  const DeltaInputs in = random_inputs(T, static_cast<uint32_t>(T));
  const HostTensor start = random_state(4, 24, 16, 7);
  HostTensor s_rec = clone(start), s_chunk = clone(start);
  HostTensor o_rec(DType::kF32, {T, 4, 24}), o_chunk(DType::kF32, {T, 4, 24});
  run(in, s_rec, o_rec, DeltaRuleForm::kRecurrent);
  run(in, s_chunk, o_chunk, DeltaRuleForm::kChunked);
  EXPECT_LT(max_diff(o_rec, o_chunk), kFormTolerance);
  EXPECT_LT(max_diff(s_rec, s_chunk), kFormTolerance);
  EXPECT_GT(max_diff(s_rec, start), 0.01f);  // the state did move
}

INSTANTIATE_TEST_SUITE_P(PromptLengths, DeltaRuleForms, ::testing::Values(1, 2, 63, 64, 65, 127, 200));

TEST(DeltaRule, ChunkedPrefillContinuesFromAnExistingState) {
  const int64_t T1 = 70, T2 = 65, T = T1 + T2;
  const DeltaInputs all = random_inputs(T, 99);
  auto part = [&](const HostTensor& x, int64_t b, int64_t e) {
    HostTensor out(DType::kF32, [&] { Shape s = x.shape(); s[0] = e - b; return s; }());
    std::memcpy(out.as<void>(), static_cast<const char*>(x.as<void>()) + x.view().nbytes() / T * b,
                x.view().nbytes() / T * (e - b));
    return out;
  };
  auto slice = [&](int64_t b, int64_t e) {
    return DeltaInputs{part(all.q, b, e), part(all.k, b, e), part(all.v, b, e), part(all.g, b, e), part(all.beta, b, e)};
  };
  HostTensor s_rec(DType::kF32, {4, 24, 16}), s_chunk(DType::kF32, {4, 24, 16});
  HostTensor o_rec(DType::kF32, {T, 4, 24});
  run(all, s_rec, o_rec, DeltaRuleForm::kRecurrent);
  HostTensor o1(DType::kF32, {T1, 4, 24}), o2(DType::kF32, {T2, 4, 24});
  run(slice(0, T1), s_chunk, o1, DeltaRuleForm::kChunked);
  run(slice(T1, T), s_chunk, o2, DeltaRuleForm::kChunked);
  EXPECT_LT(max_diff(s_rec, s_chunk), kFormTolerance);
  EXPECT_LT(max_diff(part(o_rec, T1, T), o2), kFormTolerance);
  EXPECT_LT(max_diff(part(o_rec, 0, T1), o1), kFormTolerance);
}

// §1.5 step 6 in float64, one value head at a time, S as [dk, dv].
TEST(DeltaRule, RecurrentMatchesTheSpecInFloat64) {
  const int64_t T = 9, Hk = 2, Hv = 4, dk = 16, dv = 24, r = Hv / Hk;
  const DeltaInputs in = random_inputs(T, 5);
  HostTensor state = random_state(Hv, dv, dk, 3), out(DType::kF32, {T, Hv, dv});
  const HostTensor start = clone(state);
  run(in, state, out, DeltaRuleForm::kRecurrent);
  for (int64_t j = 0; j < Hv; ++j) {
    std::vector<double> S(dk * dv);
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t b = 0; b < dv; ++b) S[a * dv + b] = start.as<float>()[(j * dv + b) * dk + a];
    for (int64_t t = 0; t < T; ++t) {
      const float* k = in.k.as<float>() + (t * Hk + j / r) * dk;
      const float* q = in.q.as<float>() + (t * Hk + j / r) * dk;
      const float* v = in.v.as<float>() + (t * Hv + j) * dv;
      const double alpha = std::exp(static_cast<double>(in.g.as<float>()[t * Hv + j]));
      const double beta = in.beta.as<float>()[t * Hv + j];
      for (double& s : S) s *= alpha;
      for (int64_t b = 0; b < dv; ++b) {
        double m = 0;
        for (int64_t a = 0; a < dk; ++a) m += S[a * dv + b] * k[a];
        const double delta = beta * (v[b] - m);
        for (int64_t a = 0; a < dk; ++a) S[a * dv + b] += k[a] * delta;
      }
      for (int64_t b = 0; b < dv; ++b) {
        double o = 0;
        for (int64_t a = 0; a < dk; ++a) o += S[a * dv + b] * q[a];
        EXPECT_NEAR(out.as<float>()[(t * Hv + j) * dv + b], o, 1e-5) << "t " << t << " head " << j;
      }
    }
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t b = 0; b < dv; ++b) EXPECT_NEAR(state.as<float>()[(j * dv + b) * dk + a], S[a * dv + b], 1e-5);
  }
}

TEST(CausalConv, WindowedStepsEqualOneCallAndTheFormula) {
  const int64_t T = 11, C = 5, K = 4;
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  HostTensor x(DType::kF32, {T, C}), w(DType::kF32, {C, K});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = n(rng);
  for (int64_t i = 0; i < w.numel(); ++i) w.as<float>()[i] = n(rng);
  HostTensor win_all(DType::kF32, {K - 1, C}), out_all(DType::kF32, {T, C});
  backend::causal_conv1d_silu(x, w, win_all, out_all);
  HostTensor win(DType::kF32, {K - 1, C}), step(DType::kF32, {1, C});
  for (int64_t t = 0; t < T; ++t) {
    backend::causal_conv1d_silu(x.view().rows(t, t + 1), w, win, step);
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        if (src >= 0) s += static_cast<double>(w.as<float>()[c * K + j]) * x.as<float>()[src * C + c];
      }
      const double expect = s / (1 + std::exp(-s));
      EXPECT_NEAR(out_all.as<float>()[t * C + c], expect, 1e-5);
      EXPECT_EQ(step.as<float>()[c], out_all.as<float>()[t * C + c]);
    }
  }
  EXPECT_EQ(max_diff(win, win_all), 0.0f);
  // The window holds the last K-1 inputs.
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(win.as<float>()[(K - 2) * C + c], x.as<float>()[(T - 1) * C + c]);
}

TEST(GdnGates, BetaIsSigmoidAndDecayIsNegativeSoftplus) {
  HostTensor a(DType::kF32, {1, 2}), b(DType::kF32, {1, 2}), a_log(DType::kF32, {2}), dt(DType::kF32, {2});
  a.as<float>()[0] = 0.5f, a.as<float>()[1] = 30.0f;
  b.as<float>()[0] = 0.0f, b.as<float>()[1] = -2.0f;
  a_log.as<float>()[0] = std::log(3.0f), a_log.as<float>()[1] = 0.0f;
  dt.as<float>()[0] = -1.0f, dt.as<float>()[1] = 0.25f;
  HostTensor g(DType::kF32, {1, 2}), beta(DType::kF32, {1, 2});
  backend::gdn_gates(a, b, a_log, dt, g, beta);
  EXPECT_NEAR(beta.as<float>()[0], 0.5f, 1e-7);
  EXPECT_NEAR(beta.as<float>()[1], 1.0 / (1.0 + std::exp(2.0)), 1e-7);
  EXPECT_NEAR(g.as<float>()[0], -3.0 * std::log1p(std::exp(-0.5)), 1e-6);
  EXPECT_NEAR(g.as<float>()[1], -30.25, 1e-4);  // softplus(x) = x above 20
}

TEST(RmsNormGated, NormalisesThenScalesByWeightAndSiluGate) {
  HostTensor x(DType::kF32, {1, 2}), w(DType::kF32, {2}), z(DType::kF32, {1, 2}), out(DType::kF32, {1, 2});
  x.as<float>()[0] = 3.0f, x.as<float>()[1] = 4.0f;
  w.as<float>()[0] = 2.0f, w.as<float>()[1] = 0.5f;
  z.as<float>()[0] = 1.0f, z.as<float>()[1] = -1.0f;
  backend::rms_norm_gated(x, w, z, 0.0f, out);
  const double rms = std::sqrt(12.5);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  EXPECT_NEAR(out.as<float>()[0], 3 / rms * 2 * silu(1), 1e-6);
  EXPECT_NEAR(out.as<float>()[1], 4 / rms * 0.5 * silu(-1), 1e-6);
}

TEST(MoeRouter, TopKOfSoftmaxRenormalised) {
  HostTensor logits(DType::kF32, {1, 4}), ids(DType::kI32, {1, 2}), w(DType::kF32, {1, 2});
  const float l[4] = {0.1f, 2.0f, -1.0f, 1.5f};
  std::copy(l, l + 4, logits.as<float>());
  backend::topk_softmax(logits, 2, true, ids, w);
  EXPECT_EQ(ids.as<int32_t>()[0], 1);
  EXPECT_EQ(ids.as<int32_t>()[1], 3);
  const double e1 = std::exp(2.0), e3 = std::exp(1.5);
  EXPECT_NEAR(w.as<float>()[0], e1 / (e1 + e3), 1e-6);
  EXPECT_NEAR(w.as<float>()[1], e3 / (e1 + e3), 1e-6);
  backend::topk_softmax(logits, 2, false, ids, w);
  double sum = 0;
  for (float v : l) sum += std::exp(static_cast<double>(v));
  EXPECT_NEAR(w.as<float>()[0], e1 / sum, 1e-6);
}

// A shared expert's gate logit as the last column: the routed slots are those of the first E
// columns alone, bit for bit, and a last slot holds expert E with weight sigmoid(gate).
TEST(MoeRouter, ASharedExpertGateTakesTheLastSlot) {
  const int64_t T = 2, E = 4, k = 2;
  const float l[T][E + 1] = {{0.1f, 2.0f, -1.0f, 1.5f, 0.7f}, {3.0f, -2.0f, 3.0f, 0.5f, -4.0f}};
  HostTensor logits(DType::kF32, {T, E + 1}), routed(DType::kF32, {T, E});
  for (int64_t t = 0; t < T; ++t) {
    std::copy(l[t], l[t] + E + 1, logits.as<float>() + t * (E + 1));
    std::copy(l[t], l[t] + E, routed.as<float>() + t * E);
  }
  for (bool renormalize : {true, false}) {
    HostTensor ids(DType::kI32, {T, k + 1}), w(DType::kF32, {T, k + 1});
    HostTensor want_ids(DType::kI32, {T, k}), want_w(DType::kF32, {T, k});
    backend::topk_softmax(logits, k, renormalize, ids, w, /*shared_last=*/true);
    backend::topk_softmax(routed, k, renormalize, want_ids, want_w);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < k; ++i) {
        EXPECT_EQ(ids.as<int32_t>()[t * (k + 1) + i], want_ids.as<int32_t>()[t * k + i]);
        EXPECT_EQ(w.as<float>()[t * (k + 1) + i], want_w.as<float>()[t * k + i]);
      }
      EXPECT_EQ(ids.as<int32_t>()[t * (k + 1) + k], E);
      EXPECT_NEAR(w.as<float>()[t * (k + 1) + k], 1.0 / (1.0 + std::exp(-static_cast<double>(l[t][E]))), 1e-7);
    }
  }
  // Token 1's tie (experts 0 and 2) goes to the lower index, as without the shared column.
  HostTensor ids(DType::kI32, {T, k + 1}), w(DType::kF32, {T, k + 1});
  backend::topk_softmax(logits, k, true, ids, w, true);
  EXPECT_EQ(ids.as<int32_t>()[k + 1], 0);
  EXPECT_EQ(ids.as<int32_t>()[k + 2], 2);
  // Shapes that do not hold the extra column or slot are refused.
  HostTensor short_ids(DType::kI32, {T, k}), short_w(DType::kF32, {T, k});
  EXPECT_THROW(backend::topk_softmax(logits, k, true, short_ids, short_w, true), Error);
  EXPECT_THROW(backend::topk_softmax(logits, E + 1, true, ids, w, true), Error);
}

}  // namespace
}  // namespace strata
