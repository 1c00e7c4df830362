// Matmul feeds (MatmulFeed, backend/ops.h; backend/cuda/feed.h): each producer that writes the
// decode matmul's input form, against the same matmul converting the producer's F32 output itself.
// The results must agree bit for bit (the form is what every block would have computed), the
// producers' F32 outputs must not change, and a feed must be recorded exactly where a form was
// written. Runs on the GPU machine; skips elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/gdn.h"
#include "backend/ops.h"
#include "backend/tensor_test_util.h"
#include "backend/tuning.h"
#include "core/dtype.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

namespace cuda = backend::cuda;
using backend::MatmulFeed;
using test::nan_tensor;
using test::random_tensor;

class CudaFeed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

struct Format {
  int bits, group;
};
const Format kFormats[] = {{4, 64}, {4, 32}, {4, 128}, {8, 64}};

std::string name(const Format& f) {
  return std::to_string(f.bits) + "-bit g" + std::to_string(f.group);
}

// An N×K MLX affine matrix on the device, BF16 scales and biases.
struct DeviceWeight {
  std::vector<cuda::DeviceTensor> buffers;
  backend::Weight w;
};

DeviceWeight device_weight(int64_t N, int64_t K, const Format& f, uint32_t seed) {
  const HostTensor wf = random_tensor({N, K}, seed, 0.05f);
  const formats::QuantizedMatrix q =
      formats::quantize_affine(wf.view(), formats::QuantParams{f.bits, f.group});
  HostTensor unused;
  DeviceWeight d;
  d.buffers.push_back(cuda::upload(q.weight.view()));
  d.buffers.push_back(cuda::upload(test::rounded(q.scales.view(), DType::kBF16, unused)));
  d.buffers.push_back(cuda::upload(test::rounded(q.biases.view(), DType::kBF16, unused)));
  d.w = {d.buffers[0].view, d.buffers[1].view, d.buffers[2].view, f.bits, f.group};
  return d;
}

HostTensor fetch(const Tensor& t) {
  HostTensor h(DType::kF32, t.shape);
  cuda::download(t, h);
  return h;
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.view().nbytes() == b.view().nbytes() &&
         std::memcmp(a.view().data, b.view().data, a.view().nbytes()) == 0;
}

// Within `tol` of ref, relative to each value's magnitude (at least 1).
::testing::AssertionResult near(const HostTensor& got, const HostTensor& ref, float tol) {
  const int64_t n = ref.view().numel();
  for (int64_t i = 0; i < n; ++i) {
    const float a = got.as<float>()[i], b = ref.as<float>()[i];
    if (!(std::fabs(a - b) <= tol * std::max(1.0f, std::fabs(b))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs " << b;
  }
  return ::testing::AssertionSuccess();
}

// x · wᵀ with the feed and without it (the matmul converting x itself), bit for bit.
void expect_fed_matmul_exact(const Tensor& x, const backend::Weight& w, const MatmulFeed& feed,
                             const std::string& what) {
  ASSERT_EQ(feed.source, x.data) << what << ": no form recorded";
  ASSERT_NE(feed.form, nullptr) << what;
  auto fed = cuda::upload(nan_tensor({1, w.rows()})), own = cuda::upload(nan_tensor({1, w.rows()}));
  backend::matmul(x, w, fed.view, &feed);
  backend::matmul(x, w, own.view);
  EXPECT_TRUE(same_bits(fetch(fed.view), fetch(own.view))) << what;
}

// The decode norms (with and without the residual add) at the hidden sizes of the bench shapes
// (4096 and 5120 spread over a cluster of 8 blocks, the others in one), every format, and at an
// 8-bit width of 18 runs (K = 1152); their F32 outputs as without a feed.
TEST_F(CudaFeed, NormsHandTheMatmulItsInputBitForBit) {
  for (const Format& f : kFormats) {
    for (int64_t K : {1024, 1152, 2048, 4096, 5120, 8192}) {
      if (K * f.bits / 8 % 128 != 0) continue;  // not a whole number of the matmul's tiles
      const std::string what = name(f) + " K " + std::to_string(K);
      const DeviceWeight dw = device_weight(300, K, f, static_cast<uint32_t>(K + f.bits));
      const HostTensor x0 = random_tensor({1, K}, 1), delta = random_tensor({1, K}, 2),
                       nw = random_tensor({K}, 3);
      auto dnw = cuda::upload(nw), ddelta = cuda::upload(delta);
      // add_rms_norm: with the feed, then without it from the same x.
      auto dx = cuda::upload(x0), dh = cuda::upload(nan_tensor({1, K}));
      MatmulFeed feed{&dw.w};
      backend::add_rms_norm(dx.view, ddelta.view, dnw.view, 1e-6f, true, dh.view, &feed);
      const HostTensor h_fed = fetch(dh.view), x_fed = fetch(dx.view);
      expect_fed_matmul_exact(dh.view, dw.w, feed, what + " add_rms_norm");
      auto dx2 = cuda::upload(x0), dh2 = cuda::upload(nan_tensor({1, K}));
      backend::add_rms_norm(dx2.view, ddelta.view, dnw.view, 1e-6f, true, dh2.view);
      // The sum of squares is reduced in another order: the last bit may differ.
      EXPECT_TRUE(near(h_fed, fetch(dh2.view), 1e-6f)) << what << " add_rms_norm output";
      EXPECT_TRUE(same_bits(x_fed, fetch(dx2.view))) << what << " residual";
      // rms_norm, in place.
      MatmulFeed feed2{&dw.w, 1};
      backend::rms_norm(dx.view, dnw.view, 1e-6f, false, dx.view, &feed2);
      expect_fed_matmul_exact(dx.view, dw.w, feed2, what + " rms_norm");
      EXPECT_NE(feed2.form, feed.form) << "slots 0 and 1 share memory";
    }
  }
}

// Where no form can be written, none is recorded (and a stale record is cleared): more rows than
// the multi-row matmul takes (a prompt), a weight of another input width, the CPU.
TEST_F(CudaFeed, RecordsNoFormWhereItWritesNone) {
  const int64_t K = 1024, rows = 65;
  const DeviceWeight dw = device_weight(64, K, {4, 64}, 7),
                     wide = device_weight(64, 2 * K, {4, 64}, 8);
  auto dx = cuda::upload(random_tensor({rows, K}, 9)),
       ddelta = cuda::upload(random_tensor({rows, K}, 10));
  auto dnw = cuda::upload(random_tensor({K}, 11)), dh = cuda::upload(nan_tensor({rows, K}));
  int stale = 0;
  MatmulFeed feed{&dw.w, 0, &stale, &stale};
  backend::add_rms_norm(dx.view, ddelta.view, dnw.view, 1e-6f, false, dh.view, &feed);
  EXPECT_EQ(feed.source, nullptr);
  EXPECT_EQ(feed.form, nullptr);
  auto dx1 = cuda::upload(random_tensor({1, K}, 12)), dh1 = cuda::upload(nan_tensor({1, K}));
  MatmulFeed other{&wide.w, 0, &stale, &stale};
  backend::rms_norm(dx1.view, dnw.view, 1e-6f, false, dh1.view, &other);
  EXPECT_EQ(other.source, nullptr);
  EXPECT_EQ(other.form, nullptr);
  HostTensor x = random_tensor({1, K}, 12), delta = random_tensor({1, K}, 13),
             nw = random_tensor({K}, 14);
  HostTensor h(DType::kF32, {1, K});
  MatmulFeed cpu{&dw.w, 0, &stale, &stale};
  backend::add_rms_norm(x.view(), delta.view(), nw.view(), 1e-6f, false, h.view(), &cpu);
  EXPECT_EQ(cpu.source, nullptr);
  EXPECT_EQ(cpu.form, nullptr);
}

// Gated attention's output gate: x ⊙ sigmoid(gate), in place as the model calls it.
TEST_F(CudaFeed, SigmoidMulHandsTheOutProjectionItsInput) {
  for (const Format& f : kFormats) {
    for (int64_t K : {2048, 4096}) {
      const std::string what = name(f) + " K " + std::to_string(K);
      const DeviceWeight dw = device_weight(200, K, f, static_cast<uint32_t>(K * 3 + f.group));
      const HostTensor x = random_tensor({1, K}, 21), gate = random_tensor({1, K}, 22);
      auto dx = cuda::upload(x), dgate = cuda::upload(gate), dx2 = cuda::upload(x);
      MatmulFeed feed{&dw.w};
      backend::sigmoid_mul(dx.view, dgate.view, dx.view, &feed);
      expect_fed_matmul_exact(dx.view, dw.w, feed, what);
      backend::sigmoid_mul(dx2.view, dgate.view, dx2.view);
      EXPECT_TRUE(same_bits(fetch(dx.view), fetch(dx2.view))) << what << " output";
    }
  }
}

// gate/up hand SiLU(gate) ⊙ up to the down projection: the last m-tile of each run converts it.
// Shapes of the 9B and 0.8B MLPs and a small one; each twice, so the run counts are seen to reset;
// and with the norm's feed into gate/up as the model runs it.
TEST_F(CudaFeed, GateUpHandTheDownProjectionItsInput) {
  struct Mlp {
    int64_t H, I;
  };
  for (const Format& f : {Format{4, 64}, Format{4, 32}, Format{8, 64}}) {
    for (const Mlp& m : {Mlp{4096, 12288}, Mlp{1024, 3584}, Mlp{1024, 512}}) {
      const std::string what = name(f) + " " + std::to_string(m.H) + "x" + std::to_string(m.I);
      const uint32_t seed = static_cast<uint32_t>(m.I + f.group);
      const DeviceWeight gate = device_weight(m.I, m.H, f, seed),
                         up = device_weight(m.I, m.H, f, seed + 1),
                         down = device_weight(m.H, m.I, f, seed + 2);
      auto dx = cuda::upload(random_tensor({1, m.H}, seed + 3)),
           dres = cuda::upload(random_tensor({1, m.H}, 5));
      auto dnw = cuda::upload(random_tensor({m.H}, 6)), dh = cuda::upload(nan_tensor({1, m.H}));
      auto dg = cuda::upload(nan_tensor({1, m.I})), du = cuda::upload(nan_tensor({1, m.I}));
      auto dact = cuda::upload(nan_tensor({1, m.I}));
      const backend::Weight* ws[] = {&gate.w, &up.w};
      const Tensor outs[] = {dg.view, du.view};
      for (int round = 0; round < 2; ++round) {
        const std::string at = what + " round " + std::to_string(round);
        MatmulFeed h_feed{&gate.w}, act_feed{&down.w, 1};
        backend::add_rms_norm(dres.view, dx.view, dnw.view, 1e-6f, false, dh.view, &h_feed);
        backend::matmul_group(dh.view, ws, outs, &h_feed, &act_feed);
        const HostTensor g_fed = fetch(dg.view), u_fed = fetch(du.view);
        ASSERT_EQ(act_feed.source, du.view.data) << at;
        auto fed = cuda::upload(nan_tensor({1, m.H})), own = cuda::upload(nan_tensor({1, m.H}));
        backend::silu_mul_matmul(dg.view, du.view, down.w, dact.view, fed.view, &act_feed);
        // Without feeds: gate/up converting h, the down projection converting the product.
        backend::matmul_group(dh.view, ws, outs);
        EXPECT_TRUE(same_bits(g_fed, fetch(dg.view)) && same_bits(u_fed, fetch(du.view)))
            << at << " gate/up";
        backend::silu_mul_matmul(dg.view, du.view, down.w, dact.view, own.view);
        EXPECT_TRUE(same_bits(fetch(fed.view), fetch(own.view))) << at << " down";
      }
    }
  }
}

// The GDN core's one-token kernel writes y's form where each block's rows are whole runs of it:
// at the 9B's and 0.8B's shapes (dv 128) split 1 or 2 ways at 4 bits, and 4 ways at 8 bits; split
// 4 ways at 4 bits (32 rows a block) it records none. y itself is the same with a feed or without.
TEST_F(CudaFeed, GdnCoreHandsTheOutProjectionItsInput) {
  struct Case {
    int64_t Hk, Hv;
    Format f;
    int split;  // Tuning::gdn_split
    bool form;
  };
  const Case cases[] = {{16, 32, {4, 64}, 0, true},
                        {16, 32, {4, 64}, 1, true},
                        {16, 16, {4, 32}, 2, true},
                        {16, 32, {8, 64}, 4, true},
                        {16, 32, {4, 64}, 4, false}};
  const int64_t dk = 128, dv = 128, K = 4;
  const backend::Tuning saved = backend::tuning();
  for (const Case& c : cases) {
    backend::Tuning tuning = saved;
    tuning.gdn_split = c.split;
    backend::set_tuning(tuning);
    const std::string what =
        name(c.f) + " Hv " + std::to_string(c.Hv) + " split " + std::to_string(c.split);
    const int64_t C = 2 * c.Hk * dk + c.Hv * dv, Cv = c.Hv * dv;
    const DeviceWeight out = device_weight(256, Cv, c.f, static_cast<uint32_t>(Cv + c.f.bits));
    const HostTensor window = random_tensor({K - 1, C}, 31),
                     state = random_tensor({c.Hv, dv, dk}, 32, 0.5f);
    std::vector<cuda::DeviceTensor> keep;
    auto up = [&](const HostTensor& t) { return keep.emplace_back(cuda::upload(t)).view; };
    auto core = [&] {
      return backend::GdnCore{.qkv = up(random_tensor({1, C}, 33)),
                              .z = up(random_tensor({1, Cv}, 34)),
                              .a = up(random_tensor({1, c.Hv}, 35, 8.0f)),
                              .b = up(random_tensor({1, c.Hv}, 36, 4.0f)),
                              .conv_weight = up(random_tensor({C, K}, 37, 0.5f)),
                              .a_log = up(random_tensor({c.Hv}, 38, 0.5f)),
                              .dt_bias = up(random_tensor({c.Hv}, 39, 4.0f)),
                              .norm = up(random_tensor({dv}, 40, 0.5f)),
                              .window = up(window),
                              .state = up(state),
                              .q = up(nan_tensor({1, c.Hk, dk})),
                              .k = up(nan_tensor({1, c.Hk, dk})),
                              .v = up(nan_tensor({1, c.Hv, dv})),
                              .g = up(nan_tensor({1, c.Hv})),
                              .beta = up(nan_tensor({1, c.Hv})),
                              .o = up(nan_tensor({1, c.Hv, dv})),
                              .q_scale = 1.0f / std::sqrt(static_cast<float>(dk))};
    };
    auto dy = cuda::upload(nan_tensor({1, Cv})), dy2 = cuda::upload(nan_tensor({1, Cv}));
    MatmulFeed feed{&out.w};
    backend::gdn_core(core(), dy.view, &feed);
    backend::gdn_core(core(), dy2.view);
    EXPECT_TRUE(same_bits(fetch(dy.view), fetch(dy2.view))) << what << " y";
    if (c.form) {
      expect_fed_matmul_exact(dy.view, out.w, feed, what);
    } else {
      EXPECT_EQ(feed.source, nullptr) << what;
    }
  }
  backend::set_tuning(saved);
}

}  // namespace
}  // namespace strata
