// CPU ops: the quantized matmul (fused decode kernel and blocked prefill path) against a float
// matmul over the dequantized weights, for every bit width and group size; and RMSNorm/RoPE/
// attention against direct formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "backend/ops.h"
#include "backend/tensor_test_util.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

HostTensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  HostTensor t(DType::kF32, {rows, cols});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = d(rng);
  return t;
}

void reference_matmul(const float* x, const float* w, int64_t T, int64_t N, int64_t K, float* out) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(x[t * K + k]) * w[n * K + k];
      out[t * N + n] = static_cast<float>(s);
    }
}

class QuantizedMatmul : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(QuantizedMatmul, MatchesFloatMatmulOnDequantizedWeights) {
  const auto [bits, gs] = GetParam();
  // N·K ≥ 2^16: large enough for the kernels to split the rows over every thread.
  const int64_t N = 160, K = 512;
  HostTensor w = random_matrix(N, K, 1);
  formats::QuantizedMatrix q = formats::quantize_affine(w, {bits, gs});
  HostTensor deq = formats::dequantize_affine(q.weight, q.scales, q.biases, {bits, gs}, DType::kF32);
  backend::Weight qw{q.weight.view(), to_f32(q.scales.view()), to_f32(q.biases.view()), bits, gs};
  HostTensor scales32 = to_f32(q.scales.view()), biases32 = to_f32(q.biases.view());
  qw.scales = scales32.view();
  qw.biases = biases32.view();
  for (int64_t T : {1, 3, 8, 9, 33}) {  // fused path (≤ 8 rows) and blocked path
    HostTensor x = random_matrix(T, K, 2 + static_cast<uint32_t>(T));
    HostTensor out(DType::kF32, {T, N}), ref(DType::kF32, {T, N});
    backend::matmul(x, qw, out);
    reference_matmul(x.as<float>(), deq.as<float>(), T, N, K, ref.as<float>());
    float max_diff = 0.0f;
    for (int64_t i = 0; i < T * N; ++i) max_diff = std::max(max_diff, std::fabs(out.as<float>()[i] - ref.as<float>()[i]));
    EXPECT_LT(max_diff, 2e-3f) << "bits " << bits << " group " << gs << " T " << T;
  }
}

INSTANTIATE_TEST_SUITE_P(AllWidths, QuantizedMatmul,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8), ::testing::Values(32, 64, 128)));

HostTensor int_tensor(std::initializer_list<int32_t> values) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.as<int32_t>());
  return t;
}

TEST(FloatMatmul, MatchesReference) {
  const int64_t N = 40, K = 72;
  HostTensor w = random_matrix(N, K, 3);
  backend::Weight fw{w.view(), {}, {}, 0, 0};
  for (int64_t T : {1, 5}) {
    HostTensor x = random_matrix(T, K, 4);
    HostTensor out(DType::kF32, {T, N}), ref(DType::kF32, {T, N});
    backend::matmul(x, fw, out);
    reference_matmul(x.as<float>(), w.as<float>(), T, N, K, ref.as<float>());
    for (int64_t i = 0; i < T * N; ++i) EXPECT_NEAR(out.as<float>()[i], ref.as<float>()[i], 1e-4);
  }
}

TEST(MatmulGroup, EachOutputEqualsItsOwnMatmul) {
  HostTensor a = random_matrix(6, 32, 11), b = random_matrix(3, 32, 12), x = random_matrix(2, 32, 13);
  const backend::Weight wa{a.view(), {}, {}, 0, 0}, wb{b.view(), {}, {}, 0, 0};
  HostTensor oa(DType::kF32, {2, 6}), ob(DType::kF32, {2, 3}), ra(DType::kF32, {2, 6}), rb(DType::kF32, {2, 3});
  const backend::Weight* ws[] = {&wa, &wb};
  const Tensor outs[] = {oa.view(), ob.view()};
  backend::matmul_group(x, ws, outs);
  backend::matmul(x, wa, ra);
  backend::matmul(x, wb, rb);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(oa.as<float>()[i], ra.as<float>()[i]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ob.as<float>()[i], rb.as<float>()[i]);
}

TEST(QuantizedEmbedding, LooksUpDequantizedRows) {
  HostTensor table = random_matrix(10, 64, 5);
  formats::QuantizedMatrix q = formats::quantize_affine(table, {4, 32});
  HostTensor deq = formats::dequantize_affine(q.weight, q.scales, q.biases, {4, 32}, DType::kF32);
  HostTensor s = to_f32(q.scales.view()), b = to_f32(q.biases.view());
  backend::Weight qw{q.weight.view(), s.view(), b.view(), 4, 32};
  const HostTensor ids = int_tensor({7, 0, 7});
  HostTensor out(DType::kF32, {3, 64});
  backend::embedding(qw, ids, out);
  for (int j = 0; j < 64; ++j) {
    EXPECT_NEAR(out.as<float>()[j], deq.as<float>()[7 * 64 + j], 1e-5);
    EXPECT_NEAR(out.as<float>()[64 + j], deq.as<float>()[j], 1e-5);
  }
  const HostTensor bad = int_tensor({10});
  HostTensor one(DType::kF32, {1, 64});
  EXPECT_THROW(backend::embedding(qw, bad, one), Error);
}

TEST(RmsNorm, MatchesFormulaWithAndWithoutOffset) {
  HostTensor x = random_matrix(3, 16, 6), w = random_matrix(1, 16, 7);
  HostTensor out(DType::kF32, {3, 16});
  for (bool offset : {false, true}) {
    backend::rms_norm(x, w.view().reshaped({16}), 1e-6f, offset, out);
    for (int r = 0; r < 3; ++r) {
      double ss = 0;
      for (int i = 0; i < 16; ++i) ss += x.as<float>()[r * 16 + i] * x.as<float>()[r * 16 + i];
      const double inv = 1.0 / std::sqrt(ss / 16 + 1e-6);
      for (int i = 0; i < 16; ++i) {
        const double wi = offset ? 1.0 + w.as<float>()[i] : w.as<float>()[i];
        EXPECT_NEAR(out.as<float>()[r * 16 + i], x.as<float>()[r * 16 + i] * inv * wi, 1e-5);
      }
    }
  }
}

TEST(Rope, NeoxAndInterleavedRotatePairsByPositionAngle) {
  backend::RopeParams p;
  p.rotary_dim = 4;
  p.inv_freq = {1.0f, 0.01f};
  for (bool neox : {true, false}) {
    p.neox = neox;
    HostTensor x(DType::kF32, {1, 1, 6});
    for (int i = 0; i < 6; ++i) x.as<float>()[i] = static_cast<float>(i + 1);
    backend::rope(x, int_tensor({3}), p);
    const int a = 0, b = neox ? 2 : 1;  // the pair of frequency 0
    const float x0 = static_cast<float>(a + 1), x1 = static_cast<float>(b + 1);
    EXPECT_NEAR(x.as<float>()[a], x0 * std::cos(3.0f) - x1 * std::sin(3.0f), 1e-5);
    EXPECT_NEAR(x.as<float>()[b], x1 * std::cos(3.0f) + x0 * std::sin(3.0f), 1e-5);
    EXPECT_EQ(x.as<float>()[4], 5.0f);  // beyond rotary_dim: untouched
    EXPECT_EQ(x.as<float>()[5], 6.0f);
  }
}

TEST(Attention, SingleKeyReturnsItsValueAndCausalMaskHolds) {
  // 2 queries, 1 kv head shared by 2 query heads, D = 2. Query 0 sees only key 0.
  HostTensor q(DType::kF32, {2, 2, 2}), k(DType::kF32, {4, 1, 2}), v(DType::kF32, {4, 1, 2});
  for (int i = 0; i < 8; ++i) q.as<float>()[i] = 0.5f;
  k.as<float>()[0] = 1; k.as<float>()[1] = 0; k.as<float>()[2] = 0; k.as<float>()[3] = 1;
  v.as<float>()[0] = 10; v.as<float>()[1] = 20; v.as<float>()[2] = 30; v.as<float>()[3] = 40;
  HostTensor out(DType::kF32, {2, 2, 2});
  const HostTensor positions = int_tensor({0, 1});
  backend::attention(q, k, v, positions, 2, 1.0f, 0, out);
  EXPECT_FLOAT_EQ(out.as<float>()[0], 10.0f);
  EXPECT_FLOAT_EQ(out.as<float>()[1], 20.0f);
  // query 1 sees keys 0 and 1 with equal scores (0.5 each): the mean of the values
  EXPECT_FLOAT_EQ(out.as<float>()[4], 20.0f);
  EXPECT_FLOAT_EQ(out.as<float>()[5], 30.0f);
  // a window of 1 shows query 1 only its own key
  backend::attention(q, k, v, positions, 4, 1.0f, 1, out);
  EXPECT_FLOAT_EQ(out.as<float>()[4], 30.0f);
  // queries at positions 1 and 3 (a bound of 4): each sees its own prefix only
  HostTensor out2(DType::kF32, {2, 2, 2});
  backend::attention(q, k, v, int_tensor({1, 3}), 4, 1.0f, 2, out2);
  EXPECT_FLOAT_EQ(out2.as<float>()[0], 20.0f);  // keys 0, 1 with equal scores
  EXPECT_FLOAT_EQ(out2.as<float>()[1], 30.0f);
}

// A BF16 cache reads as the F32 cache of its values: the same outputs to the bit, for a decode step
// and a prefill, with GQA and a window. Mixed cache dtypes, or a cache of another dtype, are
// refused.
TEST(Attention, Bf16CacheEqualsTheF32CacheOfItsValues) {
  const int64_t capacity = 40, Hkv = 2, Hq = 6, D = 16;
  HostTensor k_f32, v_f32;
  const HostTensor k_bf16 =
      test::rounded(test::random_tensor({capacity, Hkv, D}, 7), DType::kBF16, k_f32);
  const HostTensor v_bf16 =
      test::rounded(test::random_tensor({capacity, Hkv, D}, 8), DType::kBF16, v_f32);
  const std::tuple<int32_t, int32_t, int64_t> cases[] = {{1, 30, 0}, {5, 20, 0}, {9, 0, 4}};
  for (const auto& [T, start, window] : cases) {
    const HostTensor q = test::random_tensor({T, Hq, D}, 9);
    std::vector<int32_t> pos;
    for (int32_t t = 0; t < T; ++t) pos.push_back(start + t);
    const HostTensor positions = test::int_tensor(pos);
    HostTensor want(DType::kF32, {T, Hq, D}), got(DType::kF32, {T, Hq, D});
    backend::attention(q, k_f32, v_f32, positions, capacity, 0.25f, window, want);
    backend::attention(q, k_bf16, v_bf16, positions, capacity, 0.25f, window, got);
    EXPECT_EQ(std::memcmp(got.as<void>(), want.as<void>(), want.view().nbytes()), 0)
        << "T " << T << " start " << start << " window " << window;
  }
  const HostTensor q = test::random_tensor({1, Hq, D}, 9), positions = int_tensor({3});
  HostTensor out(DType::kF32, {1, Hq, D});
  EXPECT_THROW(backend::attention(q, k_bf16, v_f32, positions, capacity, 1.0f, 0, out), Error);
  const HostTensor k_i32(DType::kI32, {capacity, Hkv, D}), v_i32(DType::kI32, {capacity, Hkv, D});
  EXPECT_THROW(backend::attention(q, k_i32, v_i32, positions, capacity, 1.0f, 0, out), Error);
}

TEST(StoreRows, WritesEachRowAtItsPosition) {
  HostTensor src(DType::kF32, {2, 3}), dst(DType::kF32, {5, 3});
  for (int i = 0; i < 6; ++i) src.as<float>()[i] = static_cast<float>(i + 1);
  backend::store_rows(src, int_tensor({1, 4}), dst);
  const float want[15] = {0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 4, 5, 6};
  for (int i = 0; i < 15; ++i) EXPECT_EQ(dst.as<float>()[i], want[i]) << i;
  EXPECT_THROW(backend::store_rows(src, int_tensor({1, 5}), dst), Error);
}

TEST(Argmax, FindsTheFirstLargestValuePerRow) {
  HostTensor x(DType::kF32, {2, 4});
  const float v[8] = {1, 3, 3, 2, -5, -1, -7, -1};
  std::copy(v, v + 8, x.as<float>());
  HostTensor out(DType::kI32, {2});
  backend::argmax(x, out);
  EXPECT_EQ(out.as<int32_t>()[0], 1);
  EXPECT_EQ(out.as<int32_t>()[1], 1);
}

}  // namespace
}  // namespace strata
