// Qwen3.5 hybrids against transformers (tools/make_model_goldens.py): qwen3_5 (untied and tied),
// qwen3_5_moe and qwen3_next, 8 layers (two 3 GDN + 1 attention groups), Hk=2 ≠ Hv=4, partial
// rotary 0.25, 100-token prompt, 32 greedy tokens. Each is checked as transformers saved it (HF
// text layout) and converted to the MLX layout (tests/model/checkpoint_convert.h) in float, 8-bit
// and 4-bit by our quantizer.
//
// Tolerances (max |Δlogit|; the largest reference logits are about 45):
//   float: 1e-3. The reference itself is fp32 (HF's chunked delta rule): against a float64
//     evaluation of the same weights it deviates by 2.7e-4 on qwen35_tied, and we by 4.8e-4.
//   q8 (on load, or MLX-converted) against transformers: mean |Δlogit| over the prompt within 4% of
//     the largest |reference logit|; greedy tokens identical wherever the reference's top-1 margin
//     exceeds twice the measured logit error. (Not the max: these random hybrids are
//     ill-conditioned where a GDN head's output is small, since the gated RMSNorm rescales it to
//     unit size, and top-k routing flips under any perturbation; a 0.1% change of the embeddings
//     alone moves some logits by 0.3 in a float64 evaluation.)
//   q4: greedy agreement measured and printed.
//   q8 and q4 kernels, exactly: a quantized MLX checkpoint gives the logits of its float twin (the
//     same matrices dequantized) within 1e-3 (rounding order only; measured up to 1.2e-4).
#include <gtest/gtest.h>

#include "checkpoint_convert.h"
#include "golden.h"

namespace strata {
namespace {

constexpr float kFloatTolerance = 1e-3f;
constexpr float kQ8RelativeTolerance = 0.04f;
constexpr float kDequantizedTwinTolerance = 1e-3f;

enum class Layout { kHf, kMlx };

std::string checkpoint(const std::string& name, Layout layout, std::optional<formats::QuantParams> q) {
  const std::string hf = test::test_fixture("models/" + name);
  if (layout == Layout::kHf) return hf;
  const std::string dir =
      test::scratch_dir(fmt::format("mlx-{}-{}", name, q ? fmt::format("q{}", q->bits) : "float"));
  test::convert_to_mlx(hf, dir, q);
  return dir;
}

std::unique_ptr<model::Model> load(const std::string& name, Layout layout, std::optional<formats::QuantParams> q) {
  model::LoadOptions opts;
  if (layout == Layout::kHf) opts.quantize = q;  // HF: quantize on load; MLX: converted already
  return model::load_model(checkpoint(name, layout, q), opts);
}

struct Case {
  std::string name;
  Layout layout;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << (c.layout == Layout::kHf ? " (HF)" : " (MLX)"); }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name + (info.param.layout == Layout::kHf ? "_hf" : "_mlx");
}

class HybridGolden : public ::testing::TestWithParam<Case> {};

TEST_P(HybridGolden, FloatLogitsAndGreedyTokensMatchTransformers) {
  const Case& c = GetParam();
  auto m = load(c.name, c.layout, std::nullopt);
  const test::Golden g = test::load_golden(c.name);
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_max_diff, kFloatTolerance);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
  std::printf("[ %s float ] prompt max|dlogit| %.2e, decode %.2e (max |logit| %.1f)\n", case_name({c, 0}).c_str(),
              r.prompt_max_diff, r.decode_max_diff, r.max_ref_logit);
}

TEST_P(HybridGolden, ChunkedPrefillGivesTheSameGreedyTokens) {
  const Case& c = GetParam();
  auto m = load(c.name, c.layout, std::nullopt);
  const test::Golden g = test::load_golden(c.name);
  const test::GoldenRun r = test::run_golden(*m, g, /*prefill_chunk=*/37);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
}

TEST_P(HybridGolden, Quantized8BitStaysClose) {
  const Case& c = GetParam();
  auto m = load(c.name, c.layout, formats::QuantParams{8, 64});
  const test::Golden g = test::load_golden(c.name);
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_mean_diff, kQ8RelativeTolerance * r.max_ref_logit);
  EXPECT_EQ(test::clear_mismatches(r, g.greedy, 2 * r.decode_max_diff), 0);
  std::printf("[ %s q8 ] prompt max|dlogit| %.3f mean %.4f (max |logit| %.1f), decode %.3f, greedy agreement %.0f%%\n",
              case_name({c, 0}).c_str(), r.prompt_max_diff, r.prompt_mean_diff, r.max_ref_logit, r.decode_max_diff,
              100 * test::agreement(r.greedy, g.greedy));
}

TEST_P(HybridGolden, Quantized4BitGreedyAgreement) {
  const Case& c = GetParam();
  auto m = load(c.name, c.layout, formats::QuantParams{4, 64});
  const test::Golden g = test::load_golden(c.name);
  const test::GoldenRun r = test::run_golden(*m, g);
  const double agree = test::agreement(r.greedy, g.greedy);
  std::printf("[ %s q4 ] prompt max|dlogit| %.3f mean %.4f, greedy agreement %.0f%% (%zu tokens)\n", case_name({c, 0}).c_str(),
              r.prompt_max_diff, r.prompt_mean_diff, 100 * agree, g.greedy.size());
  EXPECT_EQ(r.greedy.size(), g.greedy.size());
}

class QuantizedTwin : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedTwin, MlxQuantizedModelMatchesItsDequantizedFloatTwin) {
  const Case c{GetParam(), Layout::kMlx};
  for (int bits : {4, 8}) {
    const formats::QuantParams q{bits, 64};
    const std::string twin = test::scratch_dir(fmt::format("mlx-{}-q{}-dequantized", c.name, bits));
    test::convert_to_mlx(test::test_fixture("models/" + c.name), twin, q, /*dequantized=*/true);
    auto quantized = load(c.name, Layout::kMlx, q);
    auto dequantized = model::load_model(twin);
    const std::vector<int32_t> prompt = test::load_golden(c.name).prompt;
    const int64_t T = static_cast<int64_t>(prompt.size()), V = quantized->config().vocab_size;
    HostTensor a(DType::kF32, {T, V}), b(DType::kF32, {T, V});
    model::ModelState sa = quantized->new_state(T), sb = dequantized->new_state(T);
    quantized->forward(prompt, sa, a, true);
    dequantized->forward(prompt, sb, b, true);
    const float diff = test::max_abs_diff(a.as<float>(), b.as<float>(), T * V);
    EXPECT_LT(diff, kDequantizedTwinTolerance) << bits << "-bit";
    std::printf("[ %s q%d vs dequantized twin ] max|dlogit| %.2e\n", c.name.c_str(), bits, diff);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizedTwin, ::testing::Values("qwen35", "qwen35_tied", "qwen35_moe", "qwen3_next"));

INSTANTIATE_TEST_SUITE_P(Models, HybridGolden,
                         ::testing::Values(Case{"qwen35", Layout::kHf}, Case{"qwen35_tied", Layout::kHf},
                                           Case{"qwen35_moe", Layout::kHf}, Case{"qwen3_next", Layout::kHf},
                                           Case{"qwen35", Layout::kMlx}, Case{"qwen35_tied", Layout::kMlx},
                                           Case{"qwen35_moe", Layout::kMlx}, Case{"qwen3_next", Layout::kMlx}),
                         case_name);

// Logits for the golden prompt, all positions.
HostTensor prompt_logits(model::Model& m, const std::vector<int32_t>& prompt) {
  const int64_t T = static_cast<int64_t>(prompt.size());
  model::ModelState s = m.new_state(T);
  HostTensor out(DType::kF32, {T, m.config().vocab_size});
  m.forward(prompt, s, out, true);
  return out;
}

void expect_same_logits(model::Model& a, model::Model& b, const std::vector<int32_t>& prompt) {
  const HostTensor la = prompt_logits(a, prompt), lb = prompt_logits(b, prompt);
  EXPECT_EQ(test::max_abs_diff(la.as<float>(), lb.as<float>(), la.numel()), 0.0f);
}

TEST(HybridLayouts, MultimodalCheckpointLoadsTextOnlyAndKeepsMtp) {
  const std::string dir = test::scratch_dir("qwen35-multimodal");
  test::convert_to_multimodal(test::test_fixture("models/qwen35"), dir);
  auto text = model::load_model(test::test_fixture("models/qwen35"));
  auto multimodal = model::load_model(dir);
  expect_same_logits(*text, *multimodal, test::load_golden("qwen35").prompt);
  EXPECT_EQ(multimodal->info().mtp_layers, 1);
  EXPECT_EQ(text->info().mtp_layers, 0);
  EXPECT_EQ(multimodal->config().mtp_layers, 1);
}

TEST(HybridLayouts, FusedGateUpExpertsMatchPerExpertTensors) {
  const std::string dir = test::scratch_dir("qwen35-moe-fused");
  test::convert_to_fused_experts(test::test_fixture("models/qwen35_moe"), dir);
  auto per_expert = model::load_model(test::test_fixture("models/qwen35_moe"));
  auto fused = model::load_model(dir);
  expect_same_logits(*per_expert, *fused, test::load_golden("qwen35_moe").prompt);
}

TEST(HybridLayouts, InfoCountsLayersAndRecurrentState) {
  auto m = model::load_model(test::test_fixture("models/qwen35"));
  const model::ModelInfo i = m->info();
  EXPECT_EQ(i.family, "qwen3_5_text");
  EXPECT_EQ(i.attention_layers, 2);
  EXPECT_EQ(i.recurrent_layers, 6);
  // Per GDN layer: conv window 3 × 128 and state 4 × 16 × 16, fp32.
  EXPECT_EQ(i.state_bytes_fixed, 6u * 4u * (3 * 128 + 4 * 16 * 16));
  EXPECT_EQ(i.state_bytes_per_token, 2u * 2u * 2u * 32u * 4u);
}

TEST(HybridLayouts, MissingTensorIsAClearError) {
  const std::string dir = test::scratch_dir("qwen35-broken");
  test::convert_to_mlx(test::test_fixture("models/qwen35"), dir, std::nullopt);
  // Same config, but drop one GDN tensor by writing a checkpoint without it.
  formats::WeightStore store = formats::WeightStore::open(dir);
  test::CheckpointWriter out;
  for (const std::string& n : store.names())
    if (n.find("layers.4.linear_attn.dt_bias") == std::string::npos) out.put(n, test::copy_of(store.get(n)));
  const Json config = read_json_file(dir + "/config.json");
  const std::string broken = test::scratch_dir("qwen35-broken-2");
  out.write(broken, config);
  test::expect_error([&] { model::load_model(broken); }, ErrorKind::kNotFound, {"layers.4.linear_attn.dt_bias"});
}

}  // namespace
}  // namespace strata
