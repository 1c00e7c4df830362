// The fused CPU ops (add_rms_norm, gdn_prepare, gdn_core, qk_norm_rope_store) against the sequences of ops
// they replace in the models. The fused CPU op is the reference the CUDA kernels are tested
// against, and the model goldens were checked with the old sequence: they must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/gdn.h"
#include "backend/moe.h"
#include "backend/ops.h"
#include "backend/tensor_test_util.h"
#include "core/error.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using test::clone;
using test::int_tensor;
using test::random_tensor;
using test::inv_freq;
using test::AttnCase;

::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want) {
  if (!(got.shape == want.shape))
    return ::testing::AssertionFailure() << "shape " << got.shape.str();
  if (std::memcmp(got.data, want.data, got.nbytes()) != 0) {
    for (int64_t i = 0; i < got.numel(); ++i)
      if (std::memcmp(got.as<const float>() + i, want.as<const float>() + i, sizeof(float)) != 0)
        return ::testing::AssertionFailure() << "at " << i << ": " << got.as<const float>()[i]
                                             << " vs " << want.as<const float>()[i];
  }
  return ::testing::AssertionSuccess();
}

// ---- add_rms_norm ----

TEST(FusedOps, AddRmsNormEqualsAddThenRmsNorm) {
  for (bool one_plus_w : {false, true}) {
    const int64_t T = 5, D = 64;
    const HostTensor x0 = random_tensor({T, D}, 1), delta = random_tensor({T, D}, 2),
                     w = random_tensor({D}, 3, 0.3f);
    HostTensor x_ref = clone(x0), out_ref(DType::kF32, {T, D});
    backend::add(x_ref, delta);
    backend::rms_norm(x_ref, w, 1e-6f, one_plus_w, out_ref);

    HostTensor x = clone(x0), out(DType::kF32, {T, D});
    backend::add_rms_norm(x, delta, w, 1e-6f, one_plus_w, out);
    EXPECT_TRUE(same_bits(x, x_ref)) << "x, one_plus_w " << one_plus_w;
    EXPECT_TRUE(same_bits(out, out_ref)) << "out, one_plus_w " << one_plus_w;
  }
}

// The final norm when only the last token's logits are wanted: every row gets the add, only the
// last is normed.
TEST(FusedOps, AddRmsNormOfTheLastRowStillAddsEveryRow) {
  const int64_t T = 7, D = 48;
  const HostTensor x0 = random_tensor({T, D}, 4), delta = random_tensor({T, D}, 5),
                   w = random_tensor({D}, 6);
  HostTensor x_ref = clone(x0), last_ref(DType::kF32, {1, D});
  backend::add(x_ref, delta);
  backend::rms_norm(x_ref.view().rows(T - 1, T), w, 1e-5f, false, last_ref);

  HostTensor x = clone(x0), last(DType::kF32, {1, D});
  backend::add_rms_norm(x, delta, w, 1e-5f, false, last);
  EXPECT_TRUE(same_bits(x, x_ref));
  EXPECT_TRUE(same_bits(last, last_ref));
}

TEST(FusedOps, AddRmsNormRejectsOutputInPlace) {
  const HostTensor x = random_tensor({2, 8}, 7), delta = random_tensor({2, 8}, 8),
                   w = random_tensor({8}, 9);
  EXPECT_THROW(backend::add_rms_norm(x, delta, w, 1e-6f, false, x), Error);
}

// ---- gdn_prepare ----

struct GdnShape {
  int64_t Hk, dk, Hv, dv, K;
};

// Two calls in a row on one conv window, for T below, at and above K−1 and above a 16-token tile.
TEST(FusedOps, GdnPrepareEqualsConvSplitNormsAndGates) {
  for (const GdnShape s :
       {GdnShape{2, 16, 4, 24, 4}, GdnShape{1, 8, 3, 5, 2}, GdnShape{2, 32, 2, 32, 8}}) {
    for (int64_t T : {1, 2, 3, 40}) {
      const std::string where = "Hk " + std::to_string(s.Hk) + " dk " + std::to_string(s.dk) +
                                " K " + std::to_string(s.K) + " T " + std::to_string(T);
      const int64_t Ck = s.Hk * s.dk, Cv = s.Hv * s.dv, C = 2 * Ck + Cv;
      const uint32_t seed = static_cast<uint32_t>(100 * T + s.K);
      const HostTensor w = random_tensor({C, s.K}, seed, 0.5f),
                       a_log = random_tensor({s.Hv}, seed + 1),
                       dt = random_tensor({s.Hv}, seed + 2);
      const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
      HostTensor win_ref = random_tensor({s.K - 1, C}, seed + 3), win = clone(win_ref);
      for (int call = 0; call < 2; ++call) {
        const HostTensor qkv = random_tensor({T, C}, seed + 4 + call),
                         a = random_tensor({T, s.Hv}, seed + 6 + call, 4.0f),
                         b = random_tensor({T, s.Hv}, seed + 8 + call, 2.0f);
        // The old sequence.
        HostTensor u(DType::kF32, {T, C}), q_ref(DType::kF32, {T, s.Hk, s.dk}),
            k_ref(DType::kF32, {T, s.Hk, s.dk}), v_ref(DType::kF32, {T, s.Hv, s.dv}),
            g_ref(DType::kF32, {T, s.Hv}), beta_ref(DType::kF32, {T, s.Hv});
        backend::causal_conv1d_silu(qkv, w, win_ref, u);
        const Tensor parts[] = {q_ref.view().reshaped({T, Ck}), k_ref.view().reshaped({T, Ck}),
                                v_ref.view().reshaped({T, Cv})};
        backend::split_columns(u, parts);
        const Tensor qh = q_ref.view().reshaped({T * s.Hk, s.dk}),
                     kh = k_ref.view().reshaped({T * s.Hk, s.dk});
        backend::l2_norm(qh, 1e-6f, q_scale, qh);
        backend::l2_norm(kh, 1e-6f, 1.0f, kh);
        backend::gdn_gates(a, b, a_log, dt, g_ref, beta_ref);
        // The fused op.
        HostTensor q(DType::kF32, {T, s.Hk, s.dk}), k(DType::kF32, {T, s.Hk, s.dk}),
            v(DType::kF32, {T, s.Hv, s.dv}), g(DType::kF32, {T, s.Hv}),
            beta(DType::kF32, {T, s.Hv});
        backend::gdn_prepare(qkv, w, win, a, b, a_log, dt, 1e-6f, q_scale, q, k, v, g, beta);
        const std::string what = where + " call " + std::to_string(call);
        EXPECT_TRUE(same_bits(q, q_ref)) << what << " q";
        EXPECT_TRUE(same_bits(k, k_ref)) << what << " k";
        EXPECT_TRUE(same_bits(v, v_ref)) << what << " v";
        EXPECT_TRUE(same_bits(g, g_ref)) << what << " g";
        EXPECT_TRUE(same_bits(beta, beta_ref)) << what << " beta";
        EXPECT_TRUE(same_bits(win, win_ref)) << what << " window";
      }
    }
  }
}

TEST(FusedOps, GdnPrepareRejectsAQkvWidthThatDoesNotMatchTheHeads) {
  const HostTensor qkv = random_tensor({1, 100}, 1), w = random_tensor({100, 4}, 2),
                   win = random_tensor({3, 100}, 3);
  const HostTensor a = random_tensor({1, 4}, 4), b = random_tensor({1, 4}, 5),
                   al = random_tensor({4}, 6), dt = random_tensor({4}, 7);
  HostTensor q(DType::kF32, {1, 2, 16}), k(DType::kF32, {1, 2, 16}), v(DType::kF32, {1, 4, 24}),
      g(DType::kF32, {1, 4}), beta(DType::kF32, {1, 4});
  EXPECT_THROW(backend::gdn_prepare(qkv, w, win, a, b, al, dt, 1e-6f, 1.0f, q, k, v, g, beta),
               Error);
}

// ---- gdn_core ----

// The core of the mixer as one op: the same bits as gdn_prepare, gated_delta_rule and
// rms_norm_gated in turn, over decode steps and a prefill on one window and state.
TEST(FusedOps, GdnCoreEqualsPrepareDeltaRuleAndGatedNorm) {
  const GdnShape s{2, 16, 4, 24, 4};
  const int64_t Ck = s.Hk * s.dk, Cv = s.Hv * s.dv, C = 2 * Ck + Cv;
  const HostTensor w = random_tensor({C, s.K}, 1, 0.5f), a_log = random_tensor({s.Hv}, 2),
                   dt = random_tensor({s.Hv}, 3), norm = random_tensor({s.dv}, 4, 0.5f);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
  HostTensor win_ref = random_tensor({s.K - 1, C}, 5), win = clone(win_ref);
  HostTensor state_ref = random_tensor({s.Hv, s.dv, s.dk}, 6, 0.5f), state = clone(state_ref);
  uint32_t seed = 10;
  for (int64_t T : {1, 1, 70, 1}) {
    const auto form = T == 1 ? backend::DeltaRuleForm::kRecurrent : backend::DeltaRuleForm::kChunked;
    const HostTensor qkv = random_tensor({T, C}, seed++), z = random_tensor({T, Cv}, seed++),
                     a = random_tensor({T, s.Hv}, seed++, 4.0f), b = random_tensor({T, s.Hv}, seed++, 2.0f);
    HostTensor q(DType::kF32, {T, s.Hk, s.dk}), k(DType::kF32, {T, s.Hk, s.dk}), v(DType::kF32, {T, s.Hv, s.dv}),
        g(DType::kF32, {T, s.Hv}), beta(DType::kF32, {T, s.Hv}), o(DType::kF32, {T, s.Hv, s.dv});
    HostTensor y_ref(DType::kF32, {T, Cv}), y(DType::kF32, {T, Cv});
    backend::gdn_prepare(qkv, w, win_ref, a, b, a_log, dt, 1e-6f, q_scale, q, k, v, g, beta);
    backend::gated_delta_rule(q, k, v, g, beta, state_ref, o, form);
    backend::rms_norm_gated(o.view().reshaped({T * s.Hv, s.dv}), norm, z, 1e-6f, y_ref);
    backend::gdn_core({.qkv = qkv, .z = z, .a = a, .b = b, .conv_weight = w, .a_log = a_log, .dt_bias = dt,
                       .norm = norm, .window = win, .state = state, .q = q, .k = k, .v = v, .g = g,
                       .beta = beta, .o = o, .l2_eps = 1e-6f, .q_scale = q_scale, .norm_eps = 1e-6f,
                       .form = form},
                      y);
    const std::string what = "T " + std::to_string(T);
    EXPECT_TRUE(same_bits(y, y_ref)) << what << " y";
    EXPECT_TRUE(same_bits(win, win_ref)) << what << " window";
    EXPECT_TRUE(same_bits(state, state_ref)) << what << " state";
  }
}

TEST(FusedOps, GdnCoreRejectsAGateWidthThatDoesNotMatchTheValueHeads) {
  const GdnShape s{2, 16, 4, 24, 4};
  const int64_t Ck = s.Hk * s.dk, Cv = s.Hv * s.dv, C = 2 * Ck + Cv;
  const HostTensor qkv = random_tensor({1, C}, 1), z = random_tensor({1, Cv - 1}, 2), w = random_tensor({C, s.K}, 3),
                   win = random_tensor({s.K - 1, C}, 4), state = random_tensor({s.Hv, s.dv, s.dk}, 5),
                   a = random_tensor({1, s.Hv}, 6), al = random_tensor({s.Hv}, 7), norm = random_tensor({s.dv}, 8);
  HostTensor q(DType::kF32, {1, s.Hk, s.dk}), k(DType::kF32, {1, s.Hk, s.dk}), v(DType::kF32, {1, s.Hv, s.dv}),
      g(DType::kF32, {1, s.Hv}), beta(DType::kF32, {1, s.Hv}), o(DType::kF32, {1, s.Hv, s.dv}), y(DType::kF32, {1, Cv});
  EXPECT_THROW(backend::gdn_core({.qkv = qkv, .z = z, .a = a, .b = a, .conv_weight = w, .a_log = al, .dt_bias = al,
                                  .norm = norm, .window = win, .state = state, .q = q, .k = k, .v = v, .g = g,
                                  .beta = beta, .o = o},
                                 y),
               Error);
}

// ---- qk_norm_rope_store ----

// Llama (plain, q in place), Qwen3 (q/k norms), Qwen3.5 (gate interleaved, 1-centred norms, partial
// rotation), GPT-J-style adjacent pairs.
const AttnCase kAttnCases[] = {
    {"llama", 4, 2, 32, 32, true, false, false, false},
    {"qwen3", 4, 1, 64, 64, true, false, true, false},
    {"qwen35", 4, 2, 64, 16, true, true, true, true},
    {"interleaved_pairs", 2, 2, 16, 8, false, false, true, false},
};

// A case's inputs: T = 3 tokens at positions 2, 7 and 9 of a 10-row cache (q of width 2D where a
// gate follows each head's query), the norms' weights and the rotation.
struct QkInputs {
  explicit QkInputs(const AttnCase& c)
      : W(c.gated ? 2 * c.D : c.D),
        q(random_tensor({T, c.Hq, W}, 1)),
        k0(random_tensor({T, c.Hkv, c.D}, 2)),
        v(random_tensor({T, c.Hkv, c.D}, 3)),
        qw(random_tensor({c.D}, 4, 0.3f)),
        kw(random_tensor({c.D}, 5, 0.3f)),
        positions(int_tensor({2, 7, 9})),
        rope{inv_freq(c.rotary_dim, 10000.0f), c.rotary_dim, c.neox, 1.0f} {}
  static constexpr int64_t T = 3, capacity = 10;
  int64_t W;
  HostTensor q, k0, v, qw, kw, positions;
  backend::RopeParams rope;
};

TEST(FusedOps, QkNormRopeStoreEqualsSplitNormRopeAndStores) {
  for (const AttnCase& c : kAttnCases) {
    const QkInputs in(c);
    const int64_t T = in.T, W = in.W;
    const HostTensor &q = in.q, &k0 = in.k0, &v = in.v, &qw = in.qw, &kw = in.kw,
                     &positions = in.positions;
    const backend::RopeParams& rope = in.rope;
    const HostTensor cache0 = random_tensor({in.capacity, c.Hkv, c.D}, 6);

    // The old sequence.
    HostTensor q_ref(DType::kF32, {T, c.Hq, c.D}), gate_ref(DType::kF32, {T, c.Hq, c.D}),
        k_ref = clone(k0);
    HostTensor kc_ref = clone(cache0), vc_ref = clone(cache0);
    if (c.gated) {
      const Tensor parts[] = {q_ref.view().reshaped({T * c.Hq, c.D}),
                              gate_ref.view().reshaped({T * c.Hq, c.D})};
      backend::split_columns(q.view().reshaped({T * c.Hq, W}), parts);
    } else {
      std::memcpy(q_ref.as<float>(), q.as<float>(), q.view().nbytes());
    }
    if (c.norm) {
      backend::rms_norm(q_ref, qw, 1e-6f, c.one_plus_w, q_ref);
      backend::rms_norm(k_ref, kw, 1e-6f, c.one_plus_w, k_ref);
    }
    backend::rope(q_ref, positions, rope);
    backend::rope(k_ref, positions, rope);
    backend::store_rows(k_ref, positions, kc_ref);
    backend::store_rows(v, positions, vc_ref);

    // The fused op (in place on q when there is no gate, as the dense models call it).
    HostTensor q_out = c.gated ? HostTensor(DType::kF32, {T, c.Hq, c.D}) : clone(q);
    HostTensor gate(DType::kF32, {T, c.Hq, c.D}), k = clone(k0), kc = clone(cache0),
                                                  vc = clone(cache0);
    backend::QkNorm norm;
    if (c.norm) norm = {qw, kw, 1e-6f, c.one_plus_w};
    backend::qk_norm_rope_store(c.gated ? q.view() : q_out.view(), k, v, norm, rope, positions,
                                q_out, c.gated ? gate.view() : Tensor{}, kc, vc);
    EXPECT_TRUE(same_bits(q_out, q_ref)) << c.name << " q";
    if (c.gated) {
      EXPECT_TRUE(same_bits(gate, gate_ref)) << c.name << " gate";
    }
    EXPECT_TRUE(same_bits(k, k_ref)) << c.name << " k";
    EXPECT_TRUE(same_bits(kc, kc_ref)) << c.name << " k cache";
    EXPECT_TRUE(same_bits(vc, vc_ref)) << c.name << " v cache";
  }
}

// Into BF16 caches the op stores what it stores into F32 ones, rounded to nearest even (rows it
// does not write keep their values); q_out, the gate and k are the F32 run's to the bit.
TEST(FusedOps, QkNormRopeStoreRoundsIntoBf16Caches) {
  for (const AttnCase& c : kAttnCases) {
    const QkInputs in(c);
    const int64_t T = in.T;
    HostTensor cache_f32;
    const HostTensor cache_bf16 =
        test::rounded(random_tensor({in.capacity, c.Hkv, c.D}, 6), DType::kBF16, cache_f32);
    backend::QkNorm norm;
    if (c.norm) norm = {in.qw, in.kw, 1e-6f, c.one_plus_w};

    struct Run {
      HostTensor q_out, gate, k, kc, vc;
    };
    auto run = [&](const HostTensor& cache0) {
      Run r{c.gated ? HostTensor(DType::kF32, {T, c.Hq, c.D}) : clone(in.q),
            HostTensor(DType::kF32, {T, c.Hq, c.D}), clone(in.k0), clone(cache0), clone(cache0)};
      backend::qk_norm_rope_store(c.gated ? in.q.view() : r.q_out.view(), r.k, in.v, norm, in.rope,
                                  in.positions, r.q_out, c.gated ? r.gate.view() : Tensor{}, r.kc,
                                  r.vc);
      return r;
    };
    const Run want = run(cache_f32), got = run(cache_bf16);
    EXPECT_TRUE(same_bits(got.q_out, want.q_out)) << c.name << " q";
    if (c.gated) {
      EXPECT_TRUE(same_bits(got.gate, want.gate)) << c.name << " gate";
    }
    EXPECT_TRUE(same_bits(got.k, want.k)) << c.name << " k";
    const std::tuple<const HostTensor*, const HostTensor*, const char*> caches[] = {
        {&got.kc, &want.kc, "k cache"}, {&got.vc, &want.vc, "v cache"}};
    for (const auto& [cache, ref, what] : caches) {
      int64_t bad = 0;
      for (int64_t i = 0; i < ref->numel(); ++i)
        bad += cache->as<uint16_t>()[i] != f32_to_bf16(ref->as<float>()[i]);
      EXPECT_EQ(bad, 0) << c.name << " " << what;
    }
  }
}

TEST(FusedOps, QkNormRopeStoreRejectsAPositionOutsideTheCache) {
  const HostTensor q = random_tensor({1, 2, 16}, 1), k = random_tensor({1, 1, 16}, 2),
                   v = random_tensor({1, 1, 16}, 3);
  HostTensor kc(DType::kF32, {4, 1, 16}), vc(DType::kF32, {4, 1, 16});
  const HostTensor positions = int_tensor({4});
  backend::RopeParams rope{inv_freq(16, 10000.0f), 16, true, 1.0f};
  HostTensor q_out(DType::kF32, {1, 2, 16});
  EXPECT_THROW(backend::qk_norm_rope_store(q, k, v, {}, rope, positions, q_out, Tensor{}, kc, vc),
               Error);
}

// ---- moe_experts ----

// Experts as the model holds them: E matrices each of gate and up [I, H] and down [H, I], F32 or
// 4-bit in groups of 32 (host storage kept alive beside the weights).
struct Experts {
  std::vector<HostTensor> storage;
  std::vector<backend::Weight> gate, up, down;
};
backend::Weight test_matrix(Experts& x, int64_t rows, int64_t cols, bool quantized, uint32_t seed) {
  const HostTensor f = random_tensor({rows, cols}, seed, 0.1f);
  if (!quantized) {
    x.storage.push_back(clone(f));
    return backend::Weight{x.storage.back().view(), {}, {}, 0, 0};
  }
  formats::QuantizedMatrix q = formats::quantize_affine(f.view(), formats::QuantParams{4, 32});
  x.storage.push_back(std::move(q.weight));
  x.storage.push_back(std::move(q.scales));
  x.storage.push_back(std::move(q.biases));
  const size_t n = x.storage.size();
  return backend::Weight{x.storage[n - 3].view(), x.storage[n - 2].view(), x.storage[n - 1].view(), 4, 32};
}
Experts test_experts(int64_t E, int64_t I, int64_t H, bool quantized) {
  Experts x;
  x.storage.reserve(static_cast<size_t>(9 * E));  // views into it must not move
  for (int64_t e = 0; e < E; ++e) {
    x.gate.push_back(test_matrix(x, I, H, quantized, static_cast<uint32_t>(100 + 3 * e)));
    x.up.push_back(test_matrix(x, I, H, quantized, static_cast<uint32_t>(101 + 3 * e)));
    x.down.push_back(test_matrix(x, H, I, quantized, static_cast<uint32_t>(102 + 3 * e)));
  }
  return x;
}

// The op against a loop over experts made of the separate ops (gather the rows routed to an expert,
// its SwiGLU, scatter-add with the routing weights, experts in ascending id): what the CPU op does,
// so the same bits, for one token (decode), a few, and more than a decode step ever has. An id
// outside [0, E) (a NaN router row) adds nothing in both.
TEST(FusedOps, MoeExpertsEqualsTheLoopOverExperts) {
  const int64_t E = 6, I = 64, H = 96, k = 3;
  for (bool quantized : {false, true}) {
    const Experts x = test_experts(E, I, H, quantized);
    for (int64_t T : {1, 4, 20}) {
      const HostTensor h = random_tensor({T, H}, 7);
      std::vector<int32_t> id_list = {4, 1, 5, 0, 2, 3, 5, 4, 0, 3, -1, 1};
      id_list.resize(static_cast<size_t>(T * k));
      for (int64_t i = 12; i < T * k; ++i)  // distinct within a token: 5t + 1, + 3, + 5 (mod 6)
        id_list[static_cast<size_t>(i)] = static_cast<int32_t>((5 * (i / k) + 2 * (i % k) + 1) % E);
      HostTensor ids = int_tensor(id_list);
      Tensor ids_view = ids.view();
      ids_view.shape = Shape{T, k};
      const HostTensor w = random_tensor({T, k}, 8);
      HostTensor got = test::nan_tensor({T, H});
      const backend::Buffer table = backend::expert_table(Device::kCpu, x.gate, x.up, x.down);
      backend::moe_experts(h, ids_view, w, x.gate, x.up, x.down, table, got);

      HostTensor want(DType::kF32, {T, H});
      backend::zero(want);
      for (int32_t e = 0; e < E; ++e) {
        std::vector<int32_t> rows;
        std::vector<float> scale;
        for (int64_t i = 0; i < T * k; ++i)
          if (id_list[static_cast<size_t>(i)] == e) {
            rows.push_back(static_cast<int32_t>(i / k));
            scale.push_back(w.as<float>()[i]);
          }
        if (rows.empty()) continue;
        const int64_t n = static_cast<int64_t>(rows.size());
        HostTensor xe(DType::kF32, {n, H}), g(DType::kF32, {n, I}), u(DType::kF32, {n, I}), act(DType::kF32, {n, I}),
            ye(DType::kF32, {n, H});
        backend::cpu::gather_rows(h, rows, xe);
        backend::matmul(xe, x.gate[static_cast<size_t>(e)], g);
        backend::matmul(xe, x.up[static_cast<size_t>(e)], u);
        backend::silu_mul_matmul(g, u, x.down[static_cast<size_t>(e)], act, ye);
        backend::cpu::scatter_add_rows(ye, rows, scale, want);
      }
      const std::string what = std::string(quantized ? "4-bit" : "F32") + " T " + std::to_string(T);
      EXPECT_TRUE(same_bits(got, want)) << what;
    }
  }
}

TEST(FusedOps, MoeExpertsRejectsExpertsOfTheWrongShape) {
  const Experts x = test_experts(2, 16, 32, false);
  const HostTensor h = random_tensor({1, 32}, 9), w = random_tensor({1, 2}, 10);
  HostTensor ids = int_tensor({0, 1});
  Tensor ids_view = ids.view();
  ids_view.shape = Shape{1, 2};
  HostTensor out(DType::kF32, {1, 32});
  EXPECT_THROW(backend::moe_experts(h, ids_view, w, x.gate, x.down, x.down, {}, out), Error);  // up: [32, 16]
  EXPECT_THROW(backend::moe_experts(h, ids_view, w, x.gate, x.up, std::span(x.down).first(1), {}, out), Error);
}

}  // namespace
}  // namespace strata
