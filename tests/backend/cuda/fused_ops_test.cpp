// The fused CUDA ops (add_rms_norm, gdn_prepare, qk_norm_rope_store) against the CPU ops on host
// copies of the same random inputs, at small odd shapes and the real ones (Qwen3.5-9B: hidden 4096,
// 16 q / 4 kv heads of 256 with 64 rotary dims, GDN 16 key heads × 128 and 32 value heads × 128,
// conv kernel 4; Llama-8B: 32 q / 8 kv heads of 128). Runs on the GPU machine; where no CUDA
// device is present the tests report a skip.
//
// Tolerances: |got − ref| ≤ tol·(1 + |ref|). Plain copies and the residual sum exact (one rounding
// either side); RMSNorm and RoPE 1e-4 (as the rms_norm and rope tests: rsqrt, sincos of large
// angles); conv + SiLU, L2 norms and gates 1e-5 (as the GDN element-wise tests). Outputs start as
// NaN, so an element a kernel never writes fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/gdn.h"
#include "backend/ops.h"
#include "backend/tensor_test_util.h"
#include "core/dtype.h"

namespace strata {
namespace {

namespace cuda = backend::cuda;
using test::clone;
using test::int_tensor;
using test::nan_tensor;
using test::random_tensor;
using test::inv_freq;
using test::AttnCase;

constexpr float kNormTolerance = 1e-4f;
constexpr float kElementTolerance = 1e-5f;

// A device copy of a host tensor, placed `offset_bytes` into its allocation (4 breaks the 16-byte
// alignment that the vectorised paths need, so the scalar paths run too).
struct DeviceCopy {
  cuda::DeviceBuffer buffer;
  Tensor view;
};
DeviceCopy to_device(const Tensor& host, size_t offset_bytes = 0) {
  DeviceCopy d{cuda::DeviceBuffer(host.nbytes() + offset_bytes + 16), host};
  d.view.data = static_cast<char*>(d.buffer.data()) + offset_bytes;
  d.view.device = Device::kCuda;
  cuda::copy(host.data, Device::kCpu, d.view.data, Device::kCuda, host.nbytes());
  return d;
}

HostTensor fetch(const Tensor& device) {
  HostTensor h(device.dtype, device.shape);
  cuda::download(device, h);
  return h;
}

::testing::AssertionResult all_close(const HostTensor& got, const HostTensor& ref, float tol) {
  if (!(got.shape() == ref.shape()))
    return ::testing::AssertionFailure()
           << "shape " << got.shape().str() << " vs " << ref.shape().str();
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = got.as<float>()[i], r = ref.as<float>()[i];
    if (!(std::fabs(g - r) <= tol * (1.0f + std::fabs(r))))  // NaN fails too
      return ::testing::AssertionFailure()
             << "at " << i << " of " << ref.numel() << ": got " << g << ", want " << r;
  }
  return ::testing::AssertionSuccess();
}

class CudaFused : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// ---- add_rms_norm ----

// Widths for each path: a row in registers at 1, 2 and 4 float4s a thread (64 … 12288), too wide for
// that (20000), and not 16-byte aligned (offset 4).
TEST_F(CudaFused, AddRmsNormMatchesCpuOnEveryRowOrTheLast) {
  for (int64_t D : {64, 1000, 4096, 5120, 12288, 20000}) {
    for (int64_t rows : {1, 7}) {
      for (int64_t normed : {rows, int64_t{1}}) {
        for (bool one_plus_w : {false, true}) {
          for (size_t offset : {0, 4}) {
            const std::string what = "D " + std::to_string(D) + " rows " + std::to_string(rows) +
                                     " normed " + std::to_string(normed) + " one_plus_w " +
                                     std::to_string(one_plus_w) + " offset " +
                                     std::to_string(offset);
            const uint32_t seed = static_cast<uint32_t>(D + rows);
            const HostTensor x = random_tensor({rows, D}, seed),
                             delta = random_tensor({rows, D}, seed + 1),
                             w = random_tensor({D}, seed + 2, 0.5f);
            HostTensor x_ref = clone(x), out_ref(DType::kF32, {normed, D});
            backend::cpu::add_rms_norm(x_ref, delta, w, 1e-6f, one_plus_w, out_ref);
            const DeviceCopy dx = to_device(x, offset), dd = to_device(delta), dw = to_device(w),
                             dout = to_device(nan_tensor({normed, D}));
            backend::add_rms_norm(dx.view, dd.view, dw.view, 1e-6f, one_plus_w, dout.view);
            EXPECT_TRUE(all_close(fetch(dx.view), x_ref, 0.0f)) << what << " x";
            EXPECT_TRUE(all_close(fetch(dout.view), out_ref, kNormTolerance)) << what << " out";
          }
        }
      }
    }
  }
}

// ---- gdn_prepare ----

struct GdnShape {
  const char* name;
  int64_t Hk, dk, Hv, dv, K;
};

// Two calls in a row on one conv window (the second starts from the window the first left), for T
// below, at and above K−1, across the 16-token tiles, and a long prefill.
TEST_F(CudaFused, GdnPrepareMatchesCpuOutputsAndWindow) {
  const GdnShape shapes[] = {{"tiny", 2, 16, 4, 24, 4},
                             {"odd", 1, 8, 3, 5, 2},
                             {"k8_dk32", 2, 32, 2, 32, 8},
                             {"dk200", 1, 200, 2, 100, 3},
                             {"qwen35_0_8b", 16, 128, 16, 128, 4},
                             {"qwen35_9b", 16, 128, 32, 128, 4}};
  for (const GdnShape& s : shapes) {
    for (int64_t T : {1, 2, 3, 17, 100, 1000}) {
      const std::string where = std::string(s.name) + " T " + std::to_string(T);
      const int64_t C = 2 * s.Hk * s.dk + s.Hv * s.dv;
      const uint32_t seed = static_cast<uint32_t>(T * 10 + s.K);
      const HostTensor w = random_tensor({C, s.K}, seed, 0.5f),
                       a_log = random_tensor({s.Hv}, seed + 1, 0.5f),
                       dt = random_tensor({s.Hv}, seed + 2, 4.0f);
      const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
      HostTensor win_ref = random_tensor({s.K - 1, C}, seed + 3);
      const DeviceCopy dw = to_device(w), dal = to_device(a_log), ddt = to_device(dt),
                       dwin = to_device(win_ref);
      for (int call = 0; call < 2; ++call) {
        const std::string what = where + " call " + std::to_string(call);
        const HostTensor qkv = random_tensor({T, C}, seed + 4 + call),
                         a = random_tensor({T, s.Hv}, seed + 6 + call, 8.0f),
                         b = random_tensor({T, s.Hv}, seed + 8 + call, 4.0f);
        HostTensor q(DType::kF32, {T, s.Hk, s.dk}), k(DType::kF32, {T, s.Hk, s.dk}),
            v(DType::kF32, {T, s.Hv, s.dv}), g(DType::kF32, {T, s.Hv}),
            beta(DType::kF32, {T, s.Hv});
        backend::cpu::gdn_prepare(qkv, w, win_ref, a, b, a_log, dt, 1e-6f, q_scale, q, k, v, g,
                                  beta);
        const DeviceCopy dqkv = to_device(qkv), da = to_device(a), db = to_device(b);
        const DeviceCopy dq = to_device(nan_tensor(q.shape())),
                         dk = to_device(nan_tensor(k.shape())),
                         dv = to_device(nan_tensor(v.shape())),
                         dg = to_device(nan_tensor(g.shape())),
                         dbeta = to_device(nan_tensor(beta.shape()));
        backend::gdn_prepare(dqkv.view, dw.view, dwin.view, da.view, db.view, dal.view, ddt.view,
                             1e-6f, q_scale, dq.view, dk.view, dv.view, dg.view, dbeta.view);
        EXPECT_TRUE(all_close(fetch(dq.view), q, kElementTolerance)) << what << " q";
        EXPECT_TRUE(all_close(fetch(dk.view), k, kElementTolerance)) << what << " k";
        EXPECT_TRUE(all_close(fetch(dv.view), v, kElementTolerance)) << what << " v";
        EXPECT_TRUE(all_close(fetch(dg.view), g, kElementTolerance)) << what << " g";
        EXPECT_TRUE(all_close(fetch(dbeta.view), beta, kElementTolerance)) << what << " beta";
        EXPECT_TRUE(all_close(fetch(dwin.view), win_ref, 0.0f)) << what << " window";
      }
    }
  }
}

// ---- qk_norm_rope_store ----

const AttnCase kAttnCases[] = {
    {"llama_8b", 32, 8, 128, 128, true, false, false, false},
    {"qwen3_8b", 32, 8, 128, 128, true, false, true, false},
    {"qwen35_9b", 16, 4, 256, 64, true, true, true, true},
    {"gptj_pairs_d64", 4, 2, 64, 64, false, false, true, false},
    {"odd_d80_rot40", 5, 1, 80, 40, true, false, true, true},
    {"gated_d24", 3, 3, 24, 12, true, true, false, false},
};

// A cache's values as F32 (BF16 widened exactly).
HostTensor widened(const HostTensor& t) {
  HostTensor f(DType::kF32, t.shape());
  convert_to_f32(t.dtype(), t.as<void>(), f.as<float>(), static_cast<size_t>(t.numel()));
  return f;
}

// Positions up to 4095 (a few at the top of the cache); the rest of the caches must stay as they
// were. F32 and BF16 caches: a BF16 k row may differ from the CPU's by the one rounding step that
// the fp32 difference of k can tip (2^-8 relative); v is copied, so its rounding is the CPU's.
TEST_F(CudaFused, QkNormRopeStoreMatchesCpu) {
  const int64_t capacity = 4096;
  for (const AttnCase& c : kAttnCases) {
    const std::pair<int64_t, DType> runs[] = {{1, DType::kF32},
                                              {5, DType::kF32},
                                              {300, DType::kF32},
                                              {1, DType::kBF16},
                                              {300, DType::kBF16}};
    for (const auto& [T, cache_dtype] : runs) {
      const std::string what = std::string(c.name) + " T " + std::to_string(T) + " cache " +
                               std::string(dtype_name(cache_dtype));
      const int64_t W = c.gated ? 2 * c.D : c.D;
      const uint32_t seed = static_cast<uint32_t>(T * 100 + c.D);
      const HostTensor q = random_tensor({T, c.Hq, W}, seed, 2.0f),
                       k = random_tensor({T, c.Hkv, c.D}, seed + 1, 2.0f),
                       v = random_tensor({T, c.Hkv, c.D}, seed + 2);
      const HostTensor qw = random_tensor({c.D}, seed + 3, 0.5f),
                       kw = random_tensor({c.D}, seed + 4, 0.5f);
      std::vector<int32_t> pos(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t)
        pos[t] = static_cast<int32_t>(capacity - T + t);  // the top of the cache
      if (T == 5) pos = {0, 17, 1000, 2048, 4095};
      const HostTensor positions = int_tensor(pos);
      const backend::RopeParams rope{inv_freq(c.rotary_dim, 1000000.0f), c.rotary_dim, c.neox,
                                     1.0f};
      HostTensor unused;
      const HostTensor kc0 = test::rounded(random_tensor({capacity, c.Hkv, c.D}, seed + 5),
                                           cache_dtype, unused),
                       vc0 = test::rounded(random_tensor({capacity, c.Hkv, c.D}, seed + 6),
                                           cache_dtype, unused);

      HostTensor q_ref(DType::kF32, {T, c.Hq, c.D}), gate_ref(DType::kF32, {T, c.Hq, c.D}),
          k_ref = clone(k);
      HostTensor kc_ref = clone(kc0), vc_ref = clone(vc0);
      backend::QkNorm norm;
      if (c.norm) norm = {qw, kw, 1e-6f, c.one_plus_w};
      backend::cpu::qk_norm_rope_store(q, k_ref, v, norm, rope, {pos.data(), pos.size()},
                                       {pos.data(), pos.size()}, q_ref,
                                       c.gated ? gate_ref.view() : Tensor{}, kc_ref, vc_ref);

      // Dense models call it in place on q; Qwen3.5 splits q from its gate.
      const DeviceCopy dq = to_device(q), dk = to_device(k), dv = to_device(v),
                       dpos = to_device(positions);
      const DeviceCopy dqw = to_device(qw), dkw = to_device(kw), dkc = to_device(kc0),
                       dvc = to_device(vc0);
      const DeviceCopy dq_out = to_device(nan_tensor({T, c.Hq, c.D})),
                       dgate = to_device(nan_tensor({T, c.Hq, c.D}));
      backend::QkNorm dnorm;
      if (c.norm) dnorm = {dqw.view, dkw.view, 1e-6f, c.one_plus_w};
      const Tensor& q_out = c.gated ? dq_out.view : dq.view;
      backend::qk_norm_rope_store(dq.view, dk.view, dv.view, dnorm, rope, dpos.view, q_out,
                                  c.gated ? dgate.view : Tensor{}, dkc.view, dvc.view);
      EXPECT_TRUE(all_close(fetch(q_out), q_ref, kNormTolerance)) << what << " q";
      if (c.gated) {
        EXPECT_TRUE(all_close(fetch(dgate.view), gate_ref, 0.0f)) << what << " gate";
      }
      EXPECT_TRUE(all_close(fetch(dk.view), k_ref, kNormTolerance)) << what << " k";
      const float k_cache_tolerance = cache_dtype == DType::kBF16 ? 1.0f / 256 : kNormTolerance;
      EXPECT_TRUE(all_close(widened(fetch(dkc.view)), widened(kc_ref), k_cache_tolerance))
          << what << " k cache";
      EXPECT_TRUE(all_close(widened(fetch(dvc.view)), widened(vc_ref), 0.0f)) << what << " v cache";
    }
  }
}

// ---- graph capture ----

// The fused ops of a Qwen3.5-9B decode step captured once as a CUDA graph and replayed three times
// with a new position each time: they must neither allocate nor synchronize, and each replay must
// advance the residual, the conv window and the KV caches exactly like three eager CPU steps.
TEST_F(CudaFused, DecodeStepReplaysAsAGraph) {
  const int64_t H = 4096, Hk = 16, dk = 128, Hv = 32, dv = 128, K = 4, C = 2 * Hk * dk + Hv * dv;
  const int64_t Hq = 16, Hkv = 4, D = 256, capacity = 64;
  const HostTensor x0 = random_tensor({1, H}, 1), delta = random_tensor({1, H}, 2),
                   nw = random_tensor({H}, 3, 0.3f);
  const HostTensor qkv = random_tensor({1, C}, 4), cw = random_tensor({C, K}, 5, 0.5f);
  const HostTensor a = random_tensor({1, Hv}, 6), b = random_tensor({1, Hv}, 7);
  const HostTensor a_log = random_tensor({Hv}, 8, 0.5f), dt = random_tensor({Hv}, 9);
  const HostTensor win0 = random_tensor({K - 1, C}, 10);
  const HostTensor p = random_tensor({1, Hq, 2 * D}, 11), k0 = random_tensor({1, Hkv, D}, 12),
                   v = random_tensor({1, Hkv, D}, 13);
  const HostTensor qw = random_tensor({D}, 14, 0.3f), kw = random_tensor({D}, 15, 0.3f);
  const HostTensor cache0 = random_tensor({capacity, Hkv, D}, 16);
  const backend::RopeParams rope{inv_freq(64, 10000000.0f), 64, true, 1.0f};
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int32_t steps[] = {5, 6, 7};

  // CPU: three steps (the residual, window and caches carry over; k is re-read each step).
  HostTensor x = clone(x0), h(DType::kF32, {1, H}), win = clone(win0), kc = clone(cache0),
             vc = clone(cache0);
  HostTensor q(DType::kF32, {1, Hk, dk}), key(DType::kF32, {1, Hk, dk}),
      val(DType::kF32, {1, Hv, dv});
  HostTensor g(DType::kF32, {1, Hv}), beta(DType::kF32, {1, Hv});
  HostTensor aq(DType::kF32, {1, Hq, D}), gate(DType::kF32, {1, Hq, D}), k = clone(k0);
  for (int32_t pos : steps) {
    backend::cpu::add_rms_norm(x, delta, nw, 1e-6f, true, h);
    backend::cpu::gdn_prepare(qkv, cw, win, a, b, a_log, dt, 1e-6f, q_scale, q, key, val, g, beta);
    std::memcpy(k.as<float>(), k0.as<float>(), k0.view().nbytes());
    backend::cpu::qk_norm_rope_store(p, k, v, {qw, kw, 1e-6f, true}, rope, {&pos, 1}, {&pos, 1}, aq,
                                     gate, kc, vc);
  }

  const DeviceCopy dx = to_device(x0), ddelta = to_device(delta), dnw = to_device(nw),
                   dh = to_device(nan_tensor({1, H}));
  const DeviceCopy dqkv = to_device(qkv), dcw = to_device(cw), da = to_device(a), db = to_device(b);
  const DeviceCopy dal = to_device(a_log), ddt = to_device(dt), dwin = to_device(win0);
  const DeviceCopy dq = to_device(nan_tensor(q.shape())), dkey = to_device(nan_tensor(key.shape())),
                   dval = to_device(nan_tensor(val.shape())), dg = to_device(nan_tensor(g.shape())),
                   dbeta = to_device(nan_tensor(beta.shape()));
  const DeviceCopy dp = to_device(p), dk0 = to_device(k0), dak = to_device(k0), dav = to_device(v);
  const DeviceCopy dqw = to_device(qw), dkw = to_device(kw), dkc = to_device(cache0),
                   dvc = to_device(cache0);
  const DeviceCopy daq = to_device(nan_tensor({1, Hq, D})),
                   dgate = to_device(nan_tensor({1, Hq, D}));
  const DeviceCopy dpos = to_device(int_tensor({0}));
  cuda::begin_capture();
  backend::add_rms_norm(dx.view, ddelta.view, dnw.view, 1e-6f, true, dh.view);
  backend::gdn_prepare(dqkv.view, dcw.view, dwin.view, da.view, db.view, dal.view, ddt.view, 1e-6f,
                       q_scale, dq.view, dkey.view, dval.view, dg.view, dbeta.view);
  cuda::copy(dk0.view.data, Device::kCuda, dak.view.data, Device::kCuda, k0.view().nbytes());
  backend::qk_norm_rope_store(dp.view, dak.view, dav.view, {dqw.view, dkw.view, 1e-6f, true}, rope,
                              dpos.view, daq.view, dgate.view, dkc.view, dvc.view);
  const cuda::Graph graph = cuda::end_capture();
  for (int32_t pos : steps) {
    cuda::copy(&pos, Device::kCpu, dpos.view.data, Device::kCuda, sizeof(pos));
    graph.launch();
  }
  EXPECT_TRUE(all_close(fetch(dx.view), x, 0.0f)) << "residual";
  EXPECT_TRUE(all_close(fetch(dh.view), h, kNormTolerance)) << "normed";
  EXPECT_TRUE(all_close(fetch(dwin.view), win, 0.0f)) << "window";
  EXPECT_TRUE(all_close(fetch(dq.view), q, kElementTolerance)) << "q";
  EXPECT_TRUE(all_close(fetch(dbeta.view), beta, kElementTolerance)) << "beta";
  EXPECT_TRUE(all_close(fetch(daq.view), aq, kNormTolerance)) << "attention q";
  EXPECT_TRUE(all_close(fetch(dkc.view), kc, kNormTolerance)) << "k cache";
  EXPECT_TRUE(all_close(fetch(dvc.view), vc, 0.0f)) << "v cache";
}

}  // namespace
}  // namespace strata
