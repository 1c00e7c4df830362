// The multi-row decode matmul (gemv_tc_rows.cu): every row of a batch gets exactly the bits the
// one-row kernel gives it alone, for every bit width, group size and scale dtype, batch sizes from
// 2 to 64 (one launch and several), fused segments, SiLU(gate) ⊙ up formed on the way, activations
// handed over as the norms' forms, and short and long K (conversion in the blocks or once).
// Runs on the GPU machine; skips elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"
#include "backend/tensor_test_util.h"
#include "backend/tuning.h"
#include "core/dtype.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using test::random_tensor;

class GemvTcRows : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

struct TestWeight {
  std::vector<backend::cuda::DeviceTensor> buffers;
  backend::Weight dev;
};

void make_weight(TestWeight& tw, int64_t N, int64_t K, int bits, int gs, DType scale_dtype, uint32_t seed) {
  const HostTensor wf = random_tensor({N, K}, seed, 0.05f);
  const formats::QuantizedMatrix q = formats::quantize_affine(wf.view(), formats::QuantParams{bits, gs});
  HostTensor s32, b32;
  const HostTensor s = test::rounded(q.scales.view(), scale_dtype, s32);
  const HostTensor b = test::rounded(q.biases.view(), scale_dtype, b32);
  tw.buffers.push_back(backend::cuda::upload(q.weight.view()));
  tw.buffers.push_back(backend::cuda::upload(s));
  tw.buffers.push_back(backend::cuda::upload(b));
  tw.dev = {tw.buffers[0].view, tw.buffers[1].view, tw.buffers[2].view, bits, gs};
}

HostTensor download(const Tensor& t) {
  HostTensor h(DType::kF32, t.shape);
  backend::cuda::download(t, h);
  return h;
}

// Row t of `rows` (T rows of n values) against `alone` (n values), bit for bit.
void expect_row_bits(const HostTensor& rows, int64_t t, const HostTensor& alone, int64_t n, const std::string& what) {
  const float* a = rows.as<float>() + t * n;
  const float* b = alone.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x, y;
    std::memcpy(&x, a + i, 4);
    std::memcpy(&y, b + i, 4);
    ASSERT_EQ(x, y) << what << " row " << t << " output " << i << ": " << a[i] << " vs " << b[i] << " alone";
  }
}

// matmul_group of T rows against each row alone.
void check_group(std::span<TestWeight> tws, int64_t K, int64_t T, uint32_t seed, const std::string& what) {
  const HostTensor x = random_tensor({T, K}, seed);
  auto dx = backend::cuda::upload(x);
  std::vector<const backend::Weight*> ws;
  std::vector<backend::cuda::DeviceTensor> douts;
  std::vector<Tensor> outs;
  for (TestWeight& tw : tws) {
    ws.push_back(&tw.dev);
    douts.push_back(backend::cuda::upload(test::nan_tensor({T, tw.dev.rows()})));
    outs.push_back(douts.back().view);
  }
  backend::matmul_group(dx.view, ws, outs);
  for (int64_t t = 0; t < T; ++t) {
    HostTensor row(DType::kF32, {1, K});
    std::memcpy(row.as<float>(), x.as<float>() + t * K, static_cast<size_t>(K) * 4);
    auto drow = backend::cuda::upload(row);
    std::vector<backend::cuda::DeviceTensor> dalone;
    std::vector<Tensor> alone;
    for (const backend::Weight* w : ws) {
      dalone.push_back(backend::cuda::upload(test::nan_tensor({1, w->rows()})));
      alone.push_back(dalone.back().view);
    }
    backend::matmul_group(drow.view, ws, alone);
    for (size_t i = 0; i < ws.size(); ++i)
      expect_row_bits(download(outs[i]), t, download(alone[i]), ws[i]->rows(), what + " segment " + std::to_string(i));
  }
}

// Qwen3.5-9B shapes (a short matrix, the down projection's long K, the ragged and unevenly split
// ones of gemv_tc_test), each format, and batches that take one launch, several, and ragged groups.
TEST_F(GemvTcRows, EveryRowAsAloneEveryFormat) {
  struct Case {
    int64_t N, K;
  };
  const Case cases[] = {{4096, 4096}, {1040, 12288}, {77, 1024}, {2000, 1280}};
  uint32_t seed = 500;
  for (const Case& c : cases)
    for (int bits : {4, 8})
      for (int gs : {32, 64, 128})
        for (DType sd : {DType::kBF16, DType::kF16, DType::kF32}) {
          if (c.N == 4096 && sd != DType::kBF16) continue;  // keep it quick
          TestWeight tw;
          make_weight(tw, c.N, c.K, bits, gs, sd, ++seed);
          for (int64_t T : {2, 9, 33}) {
            if (c.N == 4096 && T != 9) continue;
            check_group(std::span<TestWeight>(&tw, 1), c.K, T, ++seed,
                        "N " + std::to_string(c.N) + " K " + std::to_string(c.K) + " bits " + std::to_string(bits) +
                            " group " + std::to_string(gs) + " scales " + std::string(dtype_name(sd)) + " T " + std::to_string(T));
          }
        }
}

TEST_F(GemvTcRows, EveryBatchSizeUpToSixtyFour) {
  TestWeight tw;
  make_weight(tw, 1000, 2048, 4, 64, DType::kBF16, 7);
  for (int64_t T : {2, 3, 7, 8, 16, 17, 31, 32, 40, 64})
    check_group(std::span<TestWeight>(&tw, 1), 2048, T, 100u + static_cast<uint32_t>(T), "T " + std::to_string(T));
}

// Both multi-row kernels, the one reading from global memory and the staged one
// (gemv_tc_staged.cu), at every batch size, and the staged one's two ways of splitting the work (one
// k slice a block, or every slice in each block): each row's bits as alone. The shapes: a short K, a
// long one, groups of 32 (two folds a run) and 8 bits, a tall matrix whose one-row launch takes one
// k slice, and fused segments of uneven heights.
TEST_F(GemvTcRows, BothKernelsAndBothSplitsEveryRowAsAlone) {
  struct Case {
    int64_t N, K;
    int bits, gs;
    DType sd;
  };
  const Case cases[] = {{1000, 2048, 4, 64, DType::kBF16},
                        {520, 12288, 4, 32, DType::kF16},
                        {300, 1024, 8, 64, DType::kF32},
                        {40000, 512, 4, 64, DType::kBF16}};
  uint32_t seed = 900;
  for (const Case& c : cases) {
    TestWeight tw;
    make_weight(tw, c.N, c.K, c.bits, c.gs, c.sd, ++seed);
    for (int staged : {0, 2})
      for (int split : {1, 2}) {
        if (staged == 0 && split == 2) continue;  // the split is the staged kernel's
        backend::Tuning t = backend::tuning();
        t.gemv_staged_rows = staged;
        t.gemv_staged_split = split;
        const backend::ScopedTuning scope(t);
        for (int64_t T : {2, 8, 9, 16, 17, 33, 64}) {
          if (c.N == 40000 && T != 17) continue;  // keep it quick
          check_group(std::span<TestWeight>(&tw, 1), c.K, T, ++seed,
                      "N " + std::to_string(c.N) + " K " + std::to_string(c.K) + " staged from " +
                          std::to_string(staged) + " split " + std::to_string(split) + " T " + std::to_string(T));
        }
      }
  }
  std::vector<TestWeight> tws(3);
  const int64_t heights[] = {700, 33, 2100};
  for (int i = 0; i < 3; ++i) make_weight(tws[static_cast<size_t>(i)], heights[i], 2048, 4, 64, DType::kBF16, 950u + i);
  for (int split : {1, 2}) {
    backend::Tuning t = backend::tuning();
    t.gemv_staged_rows = 2;
    t.gemv_staged_split = split;
    const backend::ScopedTuning scope(t);
    check_group(tws, 2048, 40, 960u + static_cast<uint32_t>(split), "segments split " + std::to_string(split));
  }
}

// With the batch_invariant tuning off, batches of up to 24 rows still get each row's own bits and
// larger ones take the prefill GEMM (bf16 activations): close to each row alone, not bit for bit;
// and a model may still batch 64 sequences.
TEST_F(GemvTcRows, NotInvariantLargeBatchesTakeTheGemm) {
  backend::Tuning t = backend::tuning();
  t.batch_invariant = false;
  const backend::ScopedTuning scope(t);
  TestWeight tw;
  make_weight(tw, 1000, 2048, 4, 64, DType::kBF16, 9);
  const backend::Weight* ws[] = {&tw.dev};
  EXPECT_EQ(backend::batch_invariant_rows(Device::kCuda, ws), 64);
  check_group(std::span<TestWeight>(&tw, 1), 2048, 24, 300, "T 24");
  for (int64_t T : {25, 64}) {
    const HostTensor x = random_tensor({T, 2048}, 301 + static_cast<uint32_t>(T));
    auto dx = backend::cuda::upload(x), dout = backend::cuda::upload(test::nan_tensor({T, 1000}));
    auto dfirst = backend::cuda::upload(test::nan_tensor({1, 1000}));
    HostTensor first(DType::kF32, {1, 2048});
    std::memcpy(first.as<float>(), x.as<float>(), 2048 * 4);
    auto dx1 = backend::cuda::upload(first);
    backend::matmul(dx.view, tw.dev, dout.view);
    backend::matmul(dx1.view, tw.dev, dfirst.view);
    const HostTensor got = download(dout.view), alone = download(dfirst.view);
    int64_t differ = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      const float a = got.as<float>()[i], b = alone.as<float>()[i];
      EXPECT_LE(std::fabs(a - b), 2e-2f * (1.0f + std::fabs(b))) << "T " << T << " output " << i;
      differ += a != b;
    }
    EXPECT_GT(differ, 0) << "T " << T << ": the GEMM's bf16 activations round some outputs";
  }
}

// The GDN input projections of the 9B (qkv, z, b, a) as one launch of segments.
TEST_F(GemvTcRows, FusedSegments) {
  const int64_t heights[] = {8192, 4096, 32, 32};
  std::vector<TestWeight> tws(4);
  for (int i = 0; i < 4; ++i) make_weight(tws[static_cast<size_t>(i)], heights[i], 4096, 4, 64, DType::kBF16, 20u + i);
  check_group(tws, 4096, 5, 30, "segments");
}

// The down projection with SiLU(gate) ⊙ up formed as the activations are converted: long K (one
// conversion launch) and short (each block converts, at one row).
TEST_F(GemvTcRows, SiluMulMatmulEveryRowAsAlone) {
  for (int64_t K : {12288, 2048}) {
    TestWeight tw;
    make_weight(tw, 512, K, 4, 64, DType::kBF16, 60u + static_cast<uint32_t>(K));
    const int64_t T = 6;
    const HostTensor gate = random_tensor({T, K}, 61), up = random_tensor({T, K}, 62);
    auto dg = backend::cuda::upload(gate), du = backend::cuda::upload(up);
    auto dact = backend::cuda::upload(test::nan_tensor({T, K})), dout = backend::cuda::upload(test::nan_tensor({T, 512}));
    backend::silu_mul_matmul(dg.view, du.view, tw.dev, dact.view, dout.view);
    const HostTensor rows = download(dout.view);
    for (int64_t t = 0; t < T; ++t) {
      HostTensor g1(DType::kF32, {1, K}), u1(DType::kF32, {1, K});
      std::memcpy(g1.as<float>(), gate.as<float>() + t * K, static_cast<size_t>(K) * 4);
      std::memcpy(u1.as<float>(), up.as<float>() + t * K, static_cast<size_t>(K) * 4);
      auto dg1 = backend::cuda::upload(g1), du1 = backend::cuda::upload(u1);
      auto da1 = backend::cuda::upload(test::nan_tensor({1, K})), do1 = backend::cuda::upload(test::nan_tensor({1, 512}));
      backend::silu_mul_matmul(dg1.view, du1.view, tw.dev, da1.view, do1.view);
      expect_row_bits(rows, t, download(do1.view), 512, "K " + std::to_string(K));
    }
  }
}

// A residual add and norm that feeds the matmul (the decoder's every layer): T rows normed and
// multiplied give each row the norm and matmul bits of that row alone (the norm writes each row's
// form as one row's), and the one-row matmul gives the same bits with the form as without it.
TEST_F(GemvTcRows, NormFeedsEveryRowAsAlone) {
  for (int64_t d : {4096, 1024}) {
    TestWeight tw;
    make_weight(tw, 768, d, 4, 32, DType::kBF16, 70u + static_cast<uint32_t>(d));
    const HostTensor norm_w = random_tensor({d}, 71);
    const int64_t T = 5;
    const HostTensor x = random_tensor({T, d}, 72), delta = random_tensor({T, d}, 73);
    auto run = [&](const HostTensor& xs, const HostTensor& ds, int64_t rows, bool feed, HostTensor& normed,
                   HostTensor& out) {
      auto dx = backend::cuda::upload(xs), dd = backend::cuda::upload(ds), dw = backend::cuda::upload(norm_w);
      auto dh = backend::cuda::upload(test::nan_tensor({rows, d})), dout = backend::cuda::upload(test::nan_tensor({rows, 768}));
      backend::MatmulFeed f{&tw.dev};
      backend::add_rms_norm(dx.view, dd.view, dw.view, 1e-6f, false, dh.view, feed ? &f : nullptr);
      backend::matmul(dh.view, tw.dev, dout.view, feed ? &f : nullptr);
      normed = download(dh.view);
      out = download(dout.view);
    };
    HostTensor normed, out;
    run(x, delta, T, true, normed, out);
    for (int64_t t = 0; t < T; ++t) {
      HostTensor x1(DType::kF32, {1, d}), d1(DType::kF32, {1, d});
      std::memcpy(x1.as<float>(), x.as<float>() + t * d, static_cast<size_t>(d) * 4);
      std::memcpy(d1.as<float>(), delta.as<float>() + t * d, static_cast<size_t>(d) * 4);
      HostTensor n1, o1, n1_plain, o1_plain;
      run(x1, d1, 1, true, n1, o1);
      expect_row_bits(normed, t, n1, d, "norm d " + std::to_string(d));
      expect_row_bits(out, t, o1, 768, "matmul d " + std::to_string(d));
      // The same normed row without its form: the matmul converts it itself, to the same bits.
      auto dh = backend::cuda::upload(n1), dout = backend::cuda::upload(test::nan_tensor({1, 768}));
      backend::matmul(dh.view, tw.dev, dout.view);
      expect_row_bits(out, t, download(dout.view), 768, "unfed matmul d " + std::to_string(d));
    }
  }
}

}  // namespace
}  // namespace strata
