// The tensor-core decode matmul (gemv_tc.cu) against an fp64 sum over the same dequantized weights:
// real model shapes, every bit width, group size and scale dtype, activations whose magnitudes would
// overflow or underflow fp16 without the per-run scaling, NaN, fused segments and determinism.
// Runs on the GPU machine; skips elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using test::random_tensor;
using test::rounded;

class GemvTc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// A quantized matrix on the host (scales and biases rounded to `scale_dtype`, kept as F32 for the
// reference) and on the device (scales and biases in `scale_dtype`).
struct TestWeight {
  formats::QuantizedMatrix q;
  HostTensor scales, biases;  // F32, the values the device sees
  std::vector<backend::cuda::DeviceTensor> buffers;
  backend::Weight dev;
};

void make_weight(TestWeight& tw, int64_t N, int64_t K, int bits, int gs, DType scale_dtype, uint32_t seed) {
  const HostTensor wf = random_tensor({N, K}, seed, 0.05f);
  tw.q = formats::quantize_affine(wf.view(), formats::QuantParams{bits, gs});
  const HostTensor s = rounded(tw.q.scales.view(), scale_dtype, tw.scales);
  const HostTensor b = rounded(tw.q.biases.view(), scale_dtype, tw.biases);
  tw.buffers.push_back(backend::cuda::upload(tw.q.weight.view()));
  tw.buffers.push_back(backend::cuda::upload(s));
  tw.buffers.push_back(backend::cuda::upload(b));
  tw.dev = {tw.buffers[0].view, tw.buffers[1].view, tw.buffers[2].view, bits, gs};
}

// Row n of W·x in fp64, and Σ|w·x| (the scale of the rounding error any fp32 sum makes).
void reference(const TestWeight& tw, int bits, int gs, const float* x, int64_t N, int64_t K, std::vector<double>& dot,
               std::vector<double>& mag) {
  const auto* codes = tw.q.weight.as<const uint32_t>();
  const int64_t words = K * bits / 32, groups = K / gs;
  const uint32_t mask = (1u << bits) - 1u;
  dot.assign(static_cast<size_t>(N), 0.0);
  mag.assign(static_cast<size_t>(N), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t q = (codes[n * words + k * bits / 32] >> (k * bits % 32)) & mask;
      const double w = static_cast<double>(tw.scales.as<float>()[n * groups + k / gs]) * q +
                       tw.biases.as<float>()[n * groups + k / gs];
      dot[static_cast<size_t>(n)] += w * x[k];
      mag[static_cast<size_t>(n)] += std::fabs(w * x[k]);
    }
  }
}

std::vector<float> run(const backend::Weight& w, const HostTensor& x) {
  HostTensor got(DType::kF32, {1, w.rows()});
  auto dx = backend::cuda::upload(x), dout = backend::cuda::upload(test::nan_tensor({1, w.rows()}));
  backend::matmul(dx.view, w, dout.view);
  backend::cuda::download(dout.view, got);
  return {got.as<float>(), got.as<float>() + w.rows()};
}

void expect_close(const std::vector<float>& got, const std::vector<double>& dot, const std::vector<double>& mag,
                  const std::string& what) {
  for (size_t n = 0; n < got.size(); ++n)
    ASSERT_NEAR(got[n], dot[n], 1e-5 * mag[n] + 1e-30) << what << " row " << n;
}

// Qwen3.5-9B decode shapes: a short matrix (one m-tile per warp, k split across 8 warps), a tall
// one (two m-tiles per warp), the MLP down projection (long K), a ragged row count; and k-tiles
// that do not split evenly over a block's k slices (K = 1280: 5 tiles at 4 bits, 10 at 8), with
// several passes per block.
TEST_F(GemvTc, RealShapesEveryWidthGroupAndScaleDtype) {
  struct Shape2 {
    int64_t N, K;
  };
  const Shape2 shapes[] = {{4096, 4096}, {8200, 4096}, {1040, 12288}, {77, 1024}, {9000, 1280}};
  uint32_t seed = 100;
  for (const Shape2& sh : shapes)
    for (int bits : {4, 8})
      for (int gs : {32, 64, 128})
        for (DType sd : {DType::kBF16, DType::kF16, DType::kF32}) {
          if (sh.N > 4096 && (gs != 64 || sd == DType::kF32)) continue;  // keep the fp64 reference quick
          TestWeight tw;
          make_weight(tw, sh.N, sh.K, bits, gs, sd, ++seed);
          const HostTensor x = random_tensor({1, sh.K}, ++seed);
          std::vector<double> dot, mag;
          reference(tw, bits, gs, x.as<float>(), sh.N, sh.K, dot, mag);
          expect_close(run(tw.dev, x), dot, mag,
                       "N " + std::to_string(sh.N) + " K " + std::to_string(sh.K) + " bits " + std::to_string(bits) +
                           " group " + std::to_string(gs) + " scales " + std::string(dtype_name(sd)));
        }
}

// Runs of activations from 1e-30 to 1e30 in one row: each run gets its own power-of-two scale, so
// neither overflows fp16 nor loses its low bits.
TEST_F(GemvTc, ActivationsFarOutsideTheFp16Range) {
  const int64_t N = 512, K = 4096;
  for (int bits : {4, 8}) {
    TestWeight tw;
    make_weight(tw, N, K, bits, 64, DType::kBF16, 7);
    HostTensor x = random_tensor({1, K}, 8);
    for (int64_t k = 0; k < K; ++k) x.as<float>()[k] *= std::pow(10.0f, static_cast<float>((k / 64) % 61 - 30));
    std::vector<double> dot, mag;
    reference(tw, bits, 64, x.as<float>(), N, K, dot, mag);
    expect_close(run(tw.dev, x), dot, mag, "bits " + std::to_string(bits));
    // All zero: exact zeros.
    HostTensor zero(DType::kF32, {1, K});
    for (float v : run(tw.dev, zero)) ASSERT_EQ(v, 0.0f);
  }
}

TEST_F(GemvTc, NanInTheActivationsReachesEveryOutput) {
  const int64_t N = 64, K = 1024;
  TestWeight tw;
  make_weight(tw, N, K, 4, 64, DType::kBF16, 9);
  HostTensor x = random_tensor({1, K}, 10);
  x.as<float>()[300] = std::numeric_limits<float>::quiet_NaN();
  for (float v : run(tw.dev, x)) ASSERT_TRUE(std::isnan(v));
}

// One launch for the GDN input projections of the 9B (qkv, z, b, a) equals the separate matmuls bit
// for bit, and repeated launches give the same bits.
TEST_F(GemvTc, FusedSegmentsMatchSeparateLaunchesBitForBit) {
  const int64_t K = 4096;
  const int64_t heights[] = {8192, 4096, 32, 32};
  std::vector<TestWeight> tws(4);
  for (int i = 0; i < 4; ++i) make_weight(tws[static_cast<size_t>(i)], heights[i], K, 4, 64, DType::kBF16, 20u + i);
  const HostTensor x = random_tensor({1, K}, 30);
  auto dx = backend::cuda::upload(x);
  std::vector<backend::cuda::DeviceTensor> douts;
  std::vector<Tensor> outs;
  std::vector<const backend::Weight*> ws;
  for (int i = 0; i < 4; ++i) {
    douts.push_back(backend::cuda::upload(test::nan_tensor({1, heights[i]})));
    outs.push_back(douts.back().view);
    ws.push_back(&tws[static_cast<size_t>(i)].dev);
  }
  backend::matmul_group(dx.view, ws, outs);
  for (int i = 0; i < 4; ++i) {
    HostTensor fused(DType::kF32, {1, heights[i]});
    backend::cuda::download(outs[static_cast<size_t>(i)], fused);
    // Alone, segment i has its own block count and warp split; the rows' sums must not depend on it
    // beyond fp32 rounding, and twice alone must give identical bits.
    const std::vector<float> alone = run(tws[static_cast<size_t>(i)].dev, x);
    const std::vector<float> again = run(tws[static_cast<size_t>(i)].dev, x);
    std::vector<double> dot, mag;
    reference(tws[static_cast<size_t>(i)], 4, 64, x.as<float>(), heights[i], K, dot, mag);
    for (int64_t n = 0; n < heights[i]; ++n) {
      ASSERT_EQ(alone[static_cast<size_t>(n)], again[static_cast<size_t>(n)]) << "segment " << i << " row " << n;
      ASSERT_NEAR(fused.as<float>()[n], dot[static_cast<size_t>(n)], 1e-5 * mag[static_cast<size_t>(n)])
          << "segment " << i << " row " << n;
    }
  }
}

// The MLP's down projection with SiLU(gate) ⊙ up formed as the activations are read (one row, the
// tensor-core kernel, at the 9B's shape), and with the product formed separately (two rows): both
// against fp64.
TEST_F(GemvTc, SiluMulMatmulMatchesTheProductThenTheMatmul) {
  const int64_t N = 4096, K = 12288;
  for (int bits : {4, 8}) {
    TestWeight tw;
    make_weight(tw, N, K, bits, 64, DType::kBF16, 40u + static_cast<uint32_t>(bits));
    for (int64_t T : {1, 2}) {
      const HostTensor gate = random_tensor({T, K}, 41), up = random_tensor({T, K}, 42);
      HostTensor act(DType::kF32, {T, K});
      for (int64_t i = 0; i < T * K; ++i) {
        const float g = gate.as<float>()[i];
        act.as<float>()[i] = g / (1.0f + std::exp(-g)) * up.as<float>()[i];
      }
      auto dg = backend::cuda::upload(gate), du = backend::cuda::upload(up), da = backend::cuda::upload(act),
           dout = backend::cuda::upload(test::nan_tensor({T, N}));
      backend::silu_mul_matmul(dg.view, du.view, tw.dev, da.view, dout.view);
      HostTensor got(DType::kF32, {T, N});
      backend::cuda::download(dout.view, got);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> dot, mag;
        reference(tw, bits, 64, act.as<float>() + t * K, N, K, dot, mag);
        // expf on the GPU and std::exp differ in the last bit: 1e-5 of the magnitude covers both.
        for (int64_t n = 0; n < N; ++n)
          ASSERT_NEAR(got.as<float>()[t * N + n], dot[static_cast<size_t>(n)], 2e-5 * mag[static_cast<size_t>(n)])
              << "bits " << bits << " T " << T << " row " << n;
      }
    }
  }
}

}  // namespace
}  // namespace strata
