// Each Gated DeltaNet op on the GPU against the CPU reference (backend/cpu/gdn.cpp) on random
// inputs, at tiny shapes and the real Qwen3.5 ones, checking the in-place state and conv window
// too. Runs on the GPU machine; where no CUDA device is present the tests report a skip.
//
// Tolerance: |got − ref| ≤ atol + rtol·|ref|, 1e-4 each for the delta rule (outputs and states of
// O(1); the CPU's two forms already differ by 2e-5, and the GPU sums in yet another order), 1e-5
// for the element-wise ops. Outputs start as NaN, so an element the kernel never writes fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/gdn.h"
#include "backend/tuning.h"

namespace strata {
namespace {

using backend::DeltaRuleForm;
namespace cuda = backend::cuda;

constexpr float kDeltaTolerance = 1e-4f;
constexpr float kElementTolerance = 1e-5f;

using test::nan_tensor;
using test::random_tensor;

HostTensor clone(const HostTensor& t) {
  HostTensor c(t.dtype(), t.shape());
  std::memcpy(c.as<void>(), t.as<void>(), t.view().nbytes());
  return c;
}

HostTensor fetch(const Tensor& device) {
  HostTensor h(DType::kF32, device.shape);
  cuda::download(device, h);
  return h;
}

// Rows [b, e) of a host tensor, copied.
HostTensor slice_rows(const HostTensor& x, int64_t b, int64_t e) {
  Shape s = x.shape();
  const size_t row_bytes = x.view().nbytes() / static_cast<size_t>(s[0]);
  s[0] = e - b;
  HostTensor out(DType::kF32, s);
  std::memcpy(out.as<void>(), static_cast<const char*>(x.as<void>()) + row_bytes * b,
              row_bytes * (e - b));
  return out;
}

::testing::AssertionResult all_close(const HostTensor& got, const HostTensor& ref, float tol) {
  if (!(got.shape() == ref.shape()))
    return ::testing::AssertionFailure() << "shape " << got.shape().str();
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = got.as<float>()[i], r = ref.as<float>()[i];
    if (!(std::fabs(g - r) <= tol + tol * std::fabs(r)))  // NaN fails too
      return ::testing::AssertionFailure()
             << "at " << i << " of " << ref.numel() << ": got " << g << ", want " << r;
  }
  return ::testing::AssertionSuccess();
}

class CudaGdn : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// ---- causal conv1d + SiLU ----

// Two calls in a row on one window (the second starts from the window the first left), for T
// below, at and above K−1, on the 9B's conv_dim and on odd channel counts.
TEST_F(CudaGdn, CausalConvMatchesCpuOutputsAndWindow) {
  struct Case {
    int64_t C, K;
  };
  for (const Case cs : {Case{8192, 4}, Case{5, 4}, Case{37, 2}, Case{300, 8}}) {
    for (int64_t T : {1, 2, 3, 7, 100}) {
      const std::string where =
          "C " + std::to_string(cs.C) + " K " + std::to_string(cs.K) + " T " + std::to_string(T);
      const uint32_t seed = static_cast<uint32_t>(cs.C * 1000 + cs.K * 100 + T);
      const HostTensor w = random_tensor({cs.C, cs.K}, seed, 0.5f);
      HostTensor win_ref = random_tensor({cs.K - 1, cs.C}, seed + 1);
      auto dw = cuda::upload(w), dwin = cuda::upload(win_ref);
      for (int call = 0; call < 2; ++call) {
        const HostTensor x = random_tensor({T, cs.C}, seed + 2 + call);
        HostTensor ref(DType::kF32, {T, cs.C});
        backend::cpu::causal_conv1d_silu(x, w, win_ref, ref);
        auto dx = cuda::upload(x), dout = cuda::upload(nan_tensor({T, cs.C}));
        backend::causal_conv1d_silu(dx.view, dw.view, dwin.view, dout.view);
        EXPECT_TRUE(all_close(fetch(dout.view), ref, kElementTolerance))
            << where << " call " << call << " out";
        EXPECT_TRUE(all_close(fetch(dwin.view), win_ref, 0.0f))
            << where << " call " << call << " window";
      }
    }
  }
}

// ---- gates and norms ----

TEST_F(CudaGdn, GatesMatchCpu) {
  for (int64_t Hv : {4, 32}) {
    for (int64_t T : {1, 9}) {
      const uint32_t seed = static_cast<uint32_t>(Hv * 10 + T);
      const HostTensor a = random_tensor({T, Hv}, seed, 8.0f),
                       b = random_tensor({T, Hv}, seed + 1, 4.0f);
      const HostTensor a_log = random_tensor({Hv}, seed + 2),
                       dt = random_tensor({Hv}, seed + 3, 4.0f);
      HostTensor g_ref(DType::kF32, {T, Hv}), beta_ref(DType::kF32, {T, Hv});
      backend::cpu::gdn_gates(a, b, a_log, dt, g_ref, beta_ref);
      auto da = cuda::upload(a), db = cuda::upload(b), dal = cuda::upload(a_log),
           ddt = cuda::upload(dt);
      auto dg = cuda::upload(nan_tensor({T, Hv})), dbeta = cuda::upload(nan_tensor({T, Hv}));
      backend::gdn_gates(da.view, db.view, dal.view, ddt.view, dg.view, dbeta.view);
      EXPECT_TRUE(all_close(fetch(dg.view), g_ref, kElementTolerance)) << "Hv " << Hv << " T " << T;
      EXPECT_TRUE(all_close(fetch(dbeta.view), beta_ref, kElementTolerance))
          << "Hv " << Hv << " T " << T;
    }
  }
}

TEST_F(CudaGdn, L2NormMatchesCpuOutOfPlaceAndInPlace) {
  for (int64_t D : {16, 128, 100, 7, 1000}) {
    const HostTensor x = random_tensor({5, 3, D}, static_cast<uint32_t>(D), 3.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    HostTensor ref(DType::kF32, {5, 3, D});
    backend::cpu::l2_norm(x, 1e-6f, scale, ref);
    auto dx = cuda::upload(x), dout = cuda::upload(nan_tensor({5, 3, D}));
    backend::l2_norm(dx.view, 1e-6f, scale, dout.view);
    EXPECT_TRUE(all_close(fetch(dout.view), ref, kElementTolerance)) << "D " << D;
    backend::l2_norm(dx.view, 1e-6f, scale, dx.view);
    EXPECT_TRUE(all_close(fetch(dx.view), ref, kElementTolerance)) << "D " << D << " in place";
  }
}

TEST_F(CudaGdn, GatedRmsNormMatchesCpu) {
  for (int64_t D : {128, 24, 30, 1000}) {
    const uint32_t seed = static_cast<uint32_t>(D);
    const HostTensor x = random_tensor({9, 4, D}, seed, 2.0f),
                     z = random_tensor({9, 4, D}, seed + 1, 3.0f);
    const HostTensor w = random_tensor({D}, seed + 2);
    HostTensor ref(DType::kF32, {9, 4, D});
    backend::cpu::rms_norm_gated(x, w, z, 1e-6f, ref);
    auto dx = cuda::upload(x), dz = cuda::upload(z), dw = cuda::upload(w);
    auto dout = cuda::upload(nan_tensor({9, 4, D}));
    backend::rms_norm_gated(dx.view, dw.view, dz.view, 1e-6f, dout.view);
    EXPECT_TRUE(all_close(fetch(dout.view), ref, kElementTolerance)) << "D " << D;
  }
}

// ---- gated delta rule ----

struct DeltaShape {
  const char* name;
  int64_t Hk, Hv, dk, dv;
};

struct DeltaInputs {
  HostTensor q, k, v, g, beta;
};

// Like a GDN layer's inputs: unit-norm q/k (q scaled by dk^-0.5), decays α = exp(g) in
// (0.33, 0.98), β in (0, 1), v of O(1).
DeltaInputs random_delta_inputs(const DeltaShape& s, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  DeltaInputs in{random_tensor({T, s.Hk, s.dk}, seed + 1), random_tensor({T, s.Hk, s.dk}, seed + 2),
                 random_tensor({T, s.Hv, s.dv}, seed + 3), HostTensor(DType::kF32, {T, s.Hv}),
                 HostTensor(DType::kF32, {T, s.Hv})};
  backend::cpu::l2_norm(in.q, 1e-6f, 1.0f / std::sqrt(static_cast<float>(s.dk)), in.q);
  backend::cpu::l2_norm(in.k, 1e-6f, 1.0f, in.k);
  for (int64_t i = 0; i < in.g.numel(); ++i) {
    in.g.as<float>()[i] = -0.02f * std::exp(4.0f * u(rng));
    in.beta.as<float>()[i] = u(rng);
  }
  return in;
}

DeltaInputs slice(const DeltaInputs& in, int64_t b, int64_t e) {
  return {slice_rows(in.q, b, e), slice_rows(in.k, b, e), slice_rows(in.v, b, e),
          slice_rows(in.g, b, e), slice_rows(in.beta, b, e)};
}

// Runs the GPU op on copies of `in` and `state`, returning the output; `state` gets the new state.
HostTensor run_gpu(const DeltaInputs& in, HostTensor& state, DeltaRuleForm form) {
  auto dq = cuda::upload(in.q), dk = cuda::upload(in.k), dv = cuda::upload(in.v);
  auto dg = cuda::upload(in.g), db = cuda::upload(in.beta), ds = cuda::upload(state);
  auto dout = cuda::upload(nan_tensor(in.v.shape()));
  backend::gated_delta_rule(dq.view, dk.view, dv.view, dg.view, db.view, ds.view, dout.view, form);
  cuda::download(ds.view, state);
  return fetch(dout.view);
}

HostTensor run_cpu(const DeltaInputs& in, HostTensor& state, DeltaRuleForm form) {
  HostTensor out(DType::kF32, in.v.shape());
  backend::cpu::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, state, out, form);
  return out;
}

const char* form_name(DeltaRuleForm f) {
  return f == DeltaRuleForm::kRecurrent ? "recurrent" : "chunked";
}

class CudaDeltaRule : public CudaGdn, public ::testing::WithParamInterface<DeltaShape> {};

// Every T of decode, speculative verify and prefill (around the 64-token chunk), both forms, from a
// random non-zero state.
TEST_P(CudaDeltaRule, MatchesCpuOutputsAndState) {
  const DeltaShape s = GetParam();
  for (int64_t T : {1, 2, 5, 8, 63, 64, 65, 200, 512}) {
    for (DeltaRuleForm form : {DeltaRuleForm::kRecurrent, DeltaRuleForm::kChunked}) {
      const uint32_t seed = static_cast<uint32_t>(T * 7 + (form == DeltaRuleForm::kChunked));
      const DeltaInputs in = random_delta_inputs(s, T, seed);
      const HostTensor start = random_tensor({s.Hv, s.dv, s.dk}, seed + 5, 0.5f);
      HostTensor s_ref = clone(start), s_got = clone(start);
      const HostTensor o_ref = run_cpu(in, s_ref, form);
      const HostTensor o_got = run_gpu(in, s_got, form);
      EXPECT_TRUE(all_close(o_got, o_ref, kDeltaTolerance))
          << "T " << T << " " << form_name(form) << " out";
      EXPECT_TRUE(all_close(s_got, s_ref, kDeltaTolerance))
          << "T " << T << " " << form_name(form) << " state";
    }
  }
}

// A prefill that continues from the state an earlier one left (70 then 65 tokens, chunked), then
// a decode step and a 4-token verify (recurrent), against the CPU's recurrence over all 140.
TEST_P(CudaDeltaRule, ContinuesFromItsOwnState) {
  const DeltaShape s = GetParam();
  const int64_t parts[] = {0, 70, 135, 136, 140};
  const DeltaInputs all = random_delta_inputs(s, parts[4], 99);
  HostTensor s_ref = random_tensor({s.Hv, s.dv, s.dk}, 98, 0.5f);
  HostTensor s_got = clone(s_ref);
  const HostTensor o_ref = run_cpu(all, s_ref, DeltaRuleForm::kRecurrent);
  for (int p = 0; p < 4; ++p) {
    const DeltaRuleForm form = p < 2 ? DeltaRuleForm::kChunked : DeltaRuleForm::kRecurrent;
    const HostTensor o_got = run_gpu(slice(all, parts[p], parts[p + 1]), s_got, form);
    EXPECT_TRUE(all_close(o_got, slice_rows(o_ref, parts[p], parts[p + 1]), kDeltaTolerance))
        << "part " << p;
  }
  EXPECT_TRUE(all_close(s_got, s_ref, kDeltaTolerance)) << "final state";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaDeltaRule,
    ::testing::Values(DeltaShape{"Tiny16", 2, 4, 16, 16}, DeltaShape{"Tiny32", 2, 4, 32, 32},
                      DeltaShape{"TinyDv24", 2, 4, 16, 24}, DeltaShape{"Dk64", 2, 4, 64, 64},
                      DeltaShape{"Dk256", 1, 2, 256, 32}, DeltaShape{"Dk48Generic", 2, 4, 48, 32},
                      DeltaShape{"Qwen35_0_8B", 16, 16, 128, 128},
                      DeltaShape{"Qwen35_9B", 16, 32, 128, 128}),
    [](const ::testing::TestParamInfo<DeltaShape>& info) { return std::string(info.param.name); });

// A decode step (conv, gates, norms, delta rule, gated norm) captured once as a CUDA graph and
// replayed three times: the ops must neither allocate nor synchronize, and each replay must advance
// the conv window and the state in place exactly like three eager CPU steps.
TEST_F(CudaGdn, DecodeStepReplaysAsAGraph) {
  const int64_t Hk = 16, Hv = 32, dk = 128, dv = 128, K = 4, C = 2 * Hk * dk + Hv * dv;
  const HostTensor x = random_tensor({1, C}, 1), w = random_tensor({C, K}, 2, 0.5f);
  const HostTensor a = random_tensor({1, Hv}, 3), b = random_tensor({1, Hv}, 4);
  const HostTensor a_log = random_tensor({Hv}, 5, 0.5f), dt = random_tensor({Hv}, 6);
  const HostTensor z = random_tensor({1, Hv, dv}, 7), nw = random_tensor({dv}, 8);
  const HostTensor win0 = random_tensor({K - 1, C}, 9),
                   state0 = random_tensor({Hv, dv, dk}, 10, 0.5f);

  // CPU: three steps on the same inputs (the window and state carry over).
  HostTensor win = clone(win0), state = clone(state0), y_ref(DType::kF32, {1, Hv, dv});
  HostTensor conv(DType::kF32, {1, C}), g(DType::kF32, {1, Hv}), beta(DType::kF32, {1, Hv});
  HostTensor q(DType::kF32, {1, Hk, dk}), k(DType::kF32, {1, Hk, dk}), v(DType::kF32, {1, Hv, dv});
  HostTensor o(DType::kF32, {1, Hv, dv});
  for (int step = 0; step < 3; ++step) {
    backend::cpu::causal_conv1d_silu(x, w, win, conv);
    std::memcpy(q.as<float>(), conv.as<float>(), Hk * dk * sizeof(float));
    std::memcpy(k.as<float>(), conv.as<float>() + Hk * dk, Hk * dk * sizeof(float));
    std::memcpy(v.as<float>(), conv.as<float>() + 2 * Hk * dk, Hv * dv * sizeof(float));
    backend::cpu::l2_norm(q, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)), q);
    backend::cpu::l2_norm(k, 1e-6f, 1.0f, k);
    backend::cpu::gdn_gates(a, b, a_log, dt, g, beta);
    backend::cpu::gated_delta_rule(q, k, v, g, beta, state, o, DeltaRuleForm::kRecurrent);
    backend::cpu::rms_norm_gated(o, nw, z, 1e-6f, y_ref);
  }

  // GPU: the conv output split into q, k, v by device copies (stand-ins for the model's split).
  auto dx = cuda::upload(x), dw = cuda::upload(w), da = cuda::upload(a), db = cuda::upload(b);
  auto dal = cuda::upload(a_log), ddt = cuda::upload(dt), dz = cuda::upload(z),
       dnw = cuda::upload(nw);
  auto dwin = cuda::upload(win0), dstate = cuda::upload(state0);
  auto dconv = cuda::upload(nan_tensor({1, C})), dg = cuda::upload(nan_tensor({1, Hv}));
  auto dbeta = cuda::upload(nan_tensor({1, Hv})), dq = cuda::upload(nan_tensor({1, Hk, dk}));
  auto dkey = cuda::upload(nan_tensor({1, Hk, dk})), dval = cuda::upload(nan_tensor({1, Hv, dv}));
  auto dout = cuda::upload(nan_tensor({1, Hv, dv})), dy = cuda::upload(nan_tensor({1, Hv, dv}));
  auto step = [&] {
    backend::causal_conv1d_silu(dx.view, dw.view, dwin.view, dconv.view);
    const float* c = dconv.view.as<const float>();
    cuda::copy(c, Device::kCuda, dq.view.data, Device::kCuda, Hk * dk * sizeof(float));
    cuda::copy(c + Hk * dk, Device::kCuda, dkey.view.data, Device::kCuda, Hk * dk * sizeof(float));
    cuda::copy(c + 2 * Hk * dk, Device::kCuda, dval.view.data, Device::kCuda,
               Hv * dv * sizeof(float));
    backend::l2_norm(dq.view, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)), dq.view);
    backend::l2_norm(dkey.view, 1e-6f, 1.0f, dkey.view);
    backend::gdn_gates(da.view, db.view, dal.view, ddt.view, dg.view, dbeta.view);
    backend::gated_delta_rule(dq.view, dkey.view, dval.view, dg.view, dbeta.view, dstate.view,
                              dout.view, DeltaRuleForm::kRecurrent);
    backend::rms_norm_gated(dout.view, dnw.view, dz.view, 1e-6f, dy.view);
  };
  cuda::begin_capture();
  step();
  const cuda::Graph graph = cuda::end_capture();
  for (int i = 0; i < 3; ++i) graph.launch();
  EXPECT_TRUE(all_close(fetch(dwin.view), win, 0.0f)) << "window";
  EXPECT_TRUE(all_close(fetch(dstate.view), state, kDeltaTolerance)) << "state";
  EXPECT_TRUE(all_close(fetch(dy.view), y_ref, kDeltaTolerance)) << "output";
}

// ---- the mixer's core as one op (gdn_core) ----

struct CoreShape {
  const char* name;
  int64_t Hk, Hv, dk, dv, K;
};

// The layer's weights and recurrent state for a core shape, on the host.
struct CoreLayer {
  HostTensor conv, a_log, dt, norm, window, state;
};

CoreLayer random_core_layer(const CoreShape& s, uint32_t seed) {
  const int64_t C = 2 * s.Hk * s.dk + s.Hv * s.dv;
  return {random_tensor({C, s.K}, seed, 0.5f),          random_tensor({s.Hv}, seed + 1, 0.5f),
          random_tensor({s.Hv}, seed + 2, 4.0f),        random_tensor({s.dv}, seed + 3, 0.5f),
          random_tensor({s.K - 1, C}, seed + 4),        random_tensor({s.Hv, s.dv, s.dk}, seed + 5, 0.5f)};
}

// A step's inputs (qkv, z, a, b), then its scratch (q, k, v, g, beta, o: NaN), on the host and
// uploaded.
struct CoreStep {
  std::vector<HostTensor> host;
  std::vector<cuda::DeviceTensor> device;
  std::vector<Tensor> host_views, device_views;
};

CoreStep random_core_step(const CoreShape& s, int64_t T, uint32_t seed) {
  CoreStep step;
  step.host.push_back(random_tensor({T, 2 * s.Hk * s.dk + s.Hv * s.dv}, seed));
  step.host.push_back(random_tensor({T, s.Hv * s.dv}, seed + 1));
  step.host.push_back(random_tensor({T, s.Hv}, seed + 2, 8.0f));
  step.host.push_back(random_tensor({T, s.Hv}, seed + 3, 4.0f));
  for (const Shape& shape : {Shape{T, s.Hk, s.dk}, Shape{T, s.Hk, s.dk}, Shape{T, s.Hv, s.dv}, Shape{T, s.Hv},
                             Shape{T, s.Hv}, Shape{T, s.Hv, s.dv}})
    step.host.push_back(nan_tensor(shape));
  for (const HostTensor& t : step.host) {
    step.host_views.push_back(t.view());
    step.device.push_back(cuda::upload(t));
  }
  for (const cuda::DeviceTensor& t : step.device) step.device_views.push_back(t.view);
  return step;
}

backend::GdnCore core_args(const CoreShape& s, int64_t T, const std::vector<Tensor>& t, const Tensor& conv,
                           const Tensor& a_log, const Tensor& dt, const Tensor& norm, const Tensor& window,
                           const Tensor& state) {
  return {.qkv = t[0],
          .z = t[1],
          .a = t[2],
          .b = t[3],
          .conv_weight = conv,
          .a_log = a_log,
          .dt_bias = dt,
          .norm = norm,
          .window = window,
          .state = state,
          .q = t[4],
          .k = t[5],
          .v = t[6],
          .g = t[7],
          .beta = t[8],
          .o = t[9],
          .l2_eps = 1e-6f,
          .q_scale = 1.0f / std::sqrt(static_cast<float>(s.dk)),
          .norm_eps = 1e-6f,
          .form = T == 1 ? DeltaRuleForm::kRecurrent : DeltaRuleForm::kChunked};
}

// Steps of 1, 3 and 1 tokens (the fused kernel for one token, the three ops it replaces otherwise)
// on one window and state, against the CPU's three ops, at every split of the value heads that fits
// (Tuning::gdn_split) and at the shapes the fused kernel does not take (dk 48, dv 5, conv width 2).
TEST_F(CudaGdn, CoreMatchesCpuOverSteps) {
  const CoreShape shapes[] = {{"tiny16", 2, 4, 16, 16, 4},  {"dv24", 2, 4, 16, 24, 4},
                              {"dk32_r4", 2, 8, 32, 32, 3}, {"dk64", 2, 4, 64, 64, 4},
                              {"dk256", 1, 2, 256, 32, 4},  {"dk48", 2, 4, 48, 32, 4},
                              {"odd", 1, 3, 8, 5, 2},       {"qwen35_0_8b", 16, 16, 128, 128, 4},
                              {"qwen35_9b", 16, 32, 128, 128, 4}};
  const backend::Tuning saved = backend::tuning();
  for (int split : {0, 1, 2, 4, 8}) {
    backend::Tuning tuning = saved;
    tuning.gdn_split = split;
    backend::set_tuning(tuning);
    for (const CoreShape& s : shapes) {
      const std::string where = std::string(s.name) + " split " + std::to_string(split);
      const int64_t C = 2 * s.Hk * s.dk + s.Hv * s.dv, Cv = s.Hv * s.dv;
      const CoreLayer L = random_core_layer(s, static_cast<uint32_t>(C));
      HostTensor window = clone(L.window), state = clone(L.state);
      auto dconv = cuda::upload(L.conv), dal = cuda::upload(L.a_log), ddt = cuda::upload(L.dt),
           dnorm = cuda::upload(L.norm), dwin = cuda::upload(L.window), dstate = cuda::upload(L.state);
      int step = 0;
      for (int64_t T : {1, 3, 1}) {
        const std::string what = where + " step " + std::to_string(step) + " T " + std::to_string(T);
        const uint32_t seed = static_cast<uint32_t>(100 * step++ + T);
        const CoreStep in = random_core_step(s, T, seed);
        HostTensor y_ref(DType::kF32, {T, Cv});
        backend::gdn_core(core_args(s, T, in.host_views, L.conv, L.a_log, L.dt, L.norm, window, state), y_ref);
        auto dy = cuda::upload(nan_tensor({T, Cv}));
        backend::gdn_core(
            core_args(s, T, in.device_views, dconv.view, dal.view, ddt.view, dnorm.view, dwin.view, dstate.view),
            dy.view);
        EXPECT_TRUE(all_close(fetch(dy.view), y_ref, kDeltaTolerance)) << what << " y";
        EXPECT_TRUE(all_close(fetch(dwin.view), window, 0.0f)) << what << " window";
        EXPECT_TRUE(all_close(fetch(dstate.view), state, kDeltaTolerance)) << what << " state";
      }
    }
  }
  backend::set_tuning(saved);
}

// The 9B's one-token core captured once as a CUDA graph and replayed three times: each replay
// advances the window and the state in place like one CPU step.
TEST_F(CudaGdn, CoreReplaysAsAGraph) {
  const CoreShape s{"qwen35_9b", 16, 32, 128, 128, 4};
  const int64_t Cv = s.Hv * s.dv;
  const CoreLayer L = random_core_layer(s, 7);
  const CoreStep in = random_core_step(s, 1, 1);
  HostTensor window = clone(L.window), state = clone(L.state), y_ref(DType::kF32, {1, Cv});
  for (int i = 0; i < 3; ++i)
    backend::gdn_core(core_args(s, 1, in.host_views, L.conv, L.a_log, L.dt, L.norm, window, state), y_ref);
  auto dconv = cuda::upload(L.conv), dal = cuda::upload(L.a_log), ddt = cuda::upload(L.dt),
       dnorm = cuda::upload(L.norm), dwin = cuda::upload(L.window), dstate = cuda::upload(L.state);
  auto dy = cuda::upload(nan_tensor({1, Cv}));
  cuda::begin_capture();
  backend::gdn_core(core_args(s, 1, in.device_views, dconv.view, dal.view, ddt.view, dnorm.view, dwin.view, dstate.view),
                    dy.view);
  const cuda::Graph graph = cuda::end_capture();
  for (int i = 0; i < 3; ++i) graph.launch();
  EXPECT_TRUE(all_close(fetch(dwin.view), window, 0.0f)) << "window";
  EXPECT_TRUE(all_close(fetch(dstate.view), state, kDeltaTolerance)) << "state";
  EXPECT_TRUE(all_close(fetch(dy.view), y_ref, kDeltaTolerance)) << "output";
}

// A batched decode step's cores (gdn_core_rows): T sequences, a token each, against their own
// windows and states in one op give each sequence bit for bit what gdn_core gives it alone (y,
// window, state), at the 9B's shape and small ones, and at a shape the fused kernel does not take
// (the rows then run one by one).
TEST_F(CudaGdn, CoreRowsGiveEachSequenceItsOwnStep) {
  const CoreShape shapes[] = {{"qwen35_9b", 16, 32, 128, 128, 4}, {"tiny16", 2, 4, 16, 16, 4}, {"dk48", 2, 4, 48, 32, 4}};
  for (const CoreShape& s : shapes) {
    const int64_t C = 2 * s.Hk * s.dk + s.Hv * s.dv, Cv = s.Hv * s.dv, T = 5;
    const CoreLayer L = random_core_layer(s, 40);
    auto dconv = cuda::upload(L.conv), dal = cuda::upload(L.a_log), ddt = cuda::upload(L.dt),
         dnorm = cuda::upload(L.norm);
    const CoreStep in = random_core_step(s, T, 41);
    std::vector<HostTensor> windows, states;
    std::vector<cuda::DeviceTensor> dwin, dstate, dwin1, dstate1;
    std::vector<Tensor> wv, sv;
    for (int64_t t = 0; t < T; ++t) {
      windows.push_back(random_tensor({s.K - 1, C}, 50u + static_cast<uint32_t>(t)));
      states.push_back(random_tensor({s.Hv, s.dv, s.dk}, 60u + static_cast<uint32_t>(t), 0.5f));
      dwin.push_back(cuda::upload(windows.back()));
      dstate.push_back(cuda::upload(states.back()));
      dwin1.push_back(cuda::upload(windows.back()));
      dstate1.push_back(cuda::upload(states.back()));
      wv.push_back(dwin.back().view);
      sv.push_back(dstate.back().view);
    }
    auto dy = cuda::upload(nan_tensor({T, Cv}));
    backend::gdn_core_rows(core_args(s, 1, in.device_views, dconv.view, dal.view, ddt.view, dnorm.view, Tensor{},
                                     Tensor{}),
                           wv, sv, dy.view);
    const HostTensor y = fetch(dy.view);
    for (int64_t t = 0; t < T; ++t) {
      const std::string what = std::string(s.name) + " sequence " + std::to_string(t);
      std::vector<Tensor> row;
      for (const Tensor& v : in.device_views) row.push_back(v.rows(t, t + 1));
      auto dy1 = cuda::upload(nan_tensor({1, Cv}));
      backend::gdn_core(core_args(s, 1, row, dconv.view, dal.view, ddt.view, dnorm.view,
                                  dwin1[static_cast<size_t>(t)].view, dstate1[static_cast<size_t>(t)].view),
                        dy1.view);
      EXPECT_TRUE(all_close(slice_rows(y, t, t + 1), fetch(dy1.view), 0.0f)) << what << " y";
      EXPECT_TRUE(all_close(fetch(dwin[static_cast<size_t>(t)].view), fetch(dwin1[static_cast<size_t>(t)].view), 0.0f))
          << what << " window";
      EXPECT_TRUE(all_close(fetch(dstate[static_cast<size_t>(t)].view), fetch(dstate1[static_cast<size_t>(t)].view), 0.0f))
          << what << " state";
    }
  }
}


// A verify step's positions of one sequence (gdn_core_positions) in one op give each position bit
// for bit what one-token gdn_core steps give it (y), leave the window and state after each
// position in its slot and after the last in the sequence's own, at the 9B's shape and small ones,
// and at a shape the fused kernel does not take (the positions then run one by one).
TEST_F(CudaGdn, CorePositionsGiveEachPositionTheOneTokenStep) {
  const CoreShape shapes[] = {{"qwen35_9b", 16, 32, 128, 128, 4}, {"tiny16", 2, 4, 16, 16, 4}, {"dk48", 2, 4, 48, 32, 4}};
  for (const CoreShape& s : shapes) {
    for (const int64_t T : {int64_t{2}, int64_t{8}}) {
      const int64_t C = 2 * s.Hk * s.dk + s.Hv * s.dv, Cv = s.Hv * s.dv;
      const CoreLayer L = random_core_layer(s, 70);
      auto dconv = cuda::upload(L.conv), dal = cuda::upload(L.a_log), ddt = cuda::upload(L.dt),
           dnorm = cuda::upload(L.norm);
      const CoreStep in = random_core_step(s, T, 71);
      auto dwin = cuda::upload(L.window), dstate = cuda::upload(L.state);
      auto dwin1 = cuda::upload(L.window), dstate1 = cuda::upload(L.state);
      std::vector<cuda::DeviceTensor> after_win, after_state;
      std::vector<Tensor> wv, sv;
      for (int64_t t = 0; t + 1 < T; ++t) {
        after_win.push_back(cuda::upload(nan_tensor({s.K - 1, C})));
        after_state.push_back(cuda::upload(nan_tensor({s.Hv, s.dv, s.dk})));
      }
      for (size_t t = 0; t < after_win.size(); ++t) wv.push_back(after_win[t].view), sv.push_back(after_state[t].view);
      auto dy = cuda::upload(nan_tensor({T, Cv}));
      backend::gdn_core_positions(
          core_args(s, T, in.device_views, dconv.view, dal.view, ddt.view, dnorm.view, dwin.view, dstate.view),
          wv, sv, dy.view);
      const HostTensor y = fetch(dy.view);
      for (int64_t t = 0; t < T; ++t) {
        const std::string what = std::string(s.name) + " T " + std::to_string(T) + " position " + std::to_string(t);
        std::vector<Tensor> row;
        for (const Tensor& v : in.device_views) row.push_back(v.rows(t, t + 1));
        auto dy1 = cuda::upload(nan_tensor({1, Cv}));
        backend::gdn_core(core_args(s, 1, row, dconv.view, dal.view, ddt.view, dnorm.view, dwin1.view, dstate1.view),
                          dy1.view);
        EXPECT_TRUE(all_close(slice_rows(y, t, t + 1), fetch(dy1.view), 0.0f)) << what << " y";
        const Tensor w_after = t + 1 < T ? wv[static_cast<size_t>(t)] : dwin.view;
        const Tensor s_after = t + 1 < T ? sv[static_cast<size_t>(t)] : dstate.view;
        EXPECT_TRUE(all_close(fetch(w_after), fetch(dwin1.view), 0.0f)) << what << " window";
        EXPECT_TRUE(all_close(fetch(s_after), fetch(dstate1.view), 0.0f)) << what << " state";
      }
    }
  }
}


}  // namespace
}  // namespace strata
