// Dense families (llama, qwen2, qwen3, mistral) against transformers: tiny random-weight checkpoints
// with reference logits for a 64-token prompt and 32 greedy tokens (tools/make_model_goldens.py).
//
// Tolerances (max |Δlogit|, logits are O(1)–O(10)):
//   float: 2e-4 (fp32 on both sides; differences are summation order only)
//   q8 on load (MLX affine, group 64): 5% of the largest |reference logit|; greedy tokens identical
//     wherever the reference's top-1 margin exceeds twice the measured logit error (random tiny
//     models have near-ties that any 8-bit rounding may flip; those are counted and printed)
//   q4 on load (group 64): greedy agreement measured and printed (sanity floor: 25%)
#include <gtest/gtest.h>

#include "golden.h"

namespace strata {
namespace {

constexpr float kFloatTolerance = 2e-4f;
constexpr float kQ8RelativeTolerance = 0.05f;

class DenseGolden : public ::testing::TestWithParam<std::string> {};

std::unique_ptr<model::Model> load(const std::string& name, std::optional<formats::QuantParams> q = {}) {
  model::LoadOptions opts;
  opts.quantize = q;
  return model::load_model(test::test_fixture("models/" + name), opts);
}

TEST_P(DenseGolden, FloatLogitsAndGreedyTokensMatchTransformers) {
  auto m = load(GetParam());
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_max_diff, kFloatTolerance);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
  std::printf("[ %s float ] prompt max|dlogit| %.2e, decode %.2e\n", GetParam().c_str(), r.prompt_max_diff,
              r.decode_max_diff);
}

TEST_P(DenseGolden, ChunkedPrefillGivesTheSameGreedyTokens) {
  auto m = load(GetParam());
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g, /*prefill_chunk=*/7);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
}

TEST_P(DenseGolden, Quantized8BitOnLoadStaysClose) {
  auto m = load(GetParam(), formats::QuantParams{8, 64});
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_max_diff, kQ8RelativeTolerance * r.max_ref_logit);
  EXPECT_EQ(test::clear_mismatches(r, g.greedy, 2 * r.decode_max_diff), 0);
  std::printf("[ %s q8 ] prompt max|dlogit| %.3f (max |logit| %.1f), decode %.3f, greedy agreement %.0f%%\n",
              GetParam().c_str(), r.prompt_max_diff, r.max_ref_logit, r.decode_max_diff,
              100 * test::agreement(r.greedy, g.greedy));
}

TEST_P(DenseGolden, Quantized4BitOnLoadGreedyAgreement) {
  auto m = load(GetParam(), formats::QuantParams{4, 64});
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g);
  const double agree = test::agreement(r.greedy, g.greedy);
  std::printf("[ %s q4 ] prompt max|dlogit| %.3f, greedy agreement %.0f%% (%zu tokens)\n", GetParam().c_str(),
              r.prompt_max_diff, 100 * agree, g.greedy.size());
  EXPECT_GE(agree, 0.25);
}

INSTANTIATE_TEST_SUITE_P(Families, DenseGolden, ::testing::Values("llama", "qwen2", "qwen3", "mistral"));

TEST(ModelLoad, MissingPathIsNotFound) {
  try {
    model::load_model("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
}

TEST(ModelLoad, FingerprintIsStableAndDependsOnWeights) {
  EXPECT_EQ(load("llama")->fingerprint(), load("llama")->fingerprint());
  EXPECT_NE(load("llama")->fingerprint(), load("qwen2")->fingerprint());
  EXPECT_NE(load("llama")->fingerprint(), load("llama", formats::QuantParams{8, 64})->fingerprint());
}

}  // namespace
}  // namespace strata
