// load_model(config, WeightStore::from_tensors(...)) against the path-based load of the same
// tensors written to a directory: same logits, same fingerprint, for every family; and synthetic
// checkpoints (model/synthetic.h): they load in every family and give finite, token-dependent
// logits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/mmap.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "model/tiny_configs.h"
#include "test_util.h"

namespace strata {
namespace {

// Tiny configs of each family: a dense llama (llama3 RoPE), and (model/tiny_configs.h) a Qwen3.5
// hybrid and a Qwen3.5-MoE.
Json tiny_dense() {
  return Json::parse(
      R"({"model_type": "llama", "vocab_size": 320, "hidden_size": 128, "intermediate_size": 192,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64}})");
}

// All-position logits of a fixed 12-token prompt.
HostTensor logits_of(model::Model& m) {
  const std::vector<int32_t> ids = {1, 7, 42, 3, 99, 5, 17, 200, 64, 8, 150, 2};
  const int64_t V = m.config().vocab_size;
  HostTensor out(DType::kF32, {static_cast<int64_t>(ids.size()), V});
  model::ModelState state = m.new_state(32);
  m.forward(ids, state, out, /*all_logits=*/true);
  return out;
}

std::string write_checkpoint(const std::string& name, const Json& config,
                             const std::map<std::string, Tensor>& t) {
  const std::string dir = test::scratch_dir(name);
  write_file_atomic(dir + "/config.json", config.dump(2));
  formats::write_safetensors(dir + "/model.safetensors", t);
  return dir;
}

struct Family {
  std::string name;
  Json config;
};
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

class InMemoryLoad : public ::testing::TestWithParam<Family> {};

TEST_P(InMemoryLoad, GivesTheLogitsAndFingerprintOfTheSameTensorsLoadedFromADirectory) {
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    const model::SyntheticCheckpoint ck =
        model::make_synthetic_checkpoint(GetParam().config, {.bits = bits});
    const std::string dir = write_checkpoint(fmt::format("in_memory_{}_q{}", GetParam().name, bits),
                                             ck.config, ck.tensors);
    auto from_dir = model::load_model(dir);
    auto from_memory = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
    EXPECT_EQ(from_memory->fingerprint(), from_dir->fingerprint());
    EXPECT_EQ(from_memory->info().weight_bytes, from_dir->info().weight_bytes);
    EXPECT_EQ(from_memory->info().quantization, fmt::format("mlx q{} g64", bits));
    const HostTensor a = logits_of(*from_dir), b = logits_of(*from_memory);
    ASSERT_EQ(a.numel(), b.numel());
    // The same kernels on the same bytes: bit-identical.
    EXPECT_EQ(std::memcmp(a.as<float>(), b.as<float>(), a.view().nbytes()), 0);
  }
}

TEST_P(InMemoryLoad, SyntheticCheckpointsGiveFiniteTokenDependentLogits) {
  const model::SyntheticCheckpoint ck =
      model::make_synthetic_checkpoint(GetParam().config, {.bits = 4});
  auto m = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
  const HostTensor logits = logits_of(*m);
  const int64_t T = logits.shape()[0], V = logits.shape()[1];
  std::set<int64_t> argmaxes;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.as<float>() + t * V;
    int64_t best = 0;
    float lo = row[0], hi = row[0];
    for (int64_t v = 0; v < V; ++v) {
      ASSERT_TRUE(std::isfinite(row[v])) << "position " << t << " token " << v;
      if (row[v] > row[best]) best = v;
      lo = std::min(lo, row[v]);
      hi = std::max(hi, row[v]);
    }
    EXPECT_GT(hi - lo, 0.01f) << "flat logits at position " << t;
    argmaxes.insert(best);
  }
  // Random weights of a sane scale: the prediction follows the input.
  EXPECT_GT(argmaxes.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Families, InMemoryLoad,
                         ::testing::Values(Family{"dense", tiny_dense()},
                                           Family{"hybrid", test::tiny_hybrid_config(false)},
                                           Family{"moe", test::tiny_hybrid_config(true)}),
                         [](const auto& info) { return info.param.name; });

TEST(InMemoryLoad, QuantizesOnLoadLikeTheFileStore) {
  // A float checkpoint (a transformers fixture) through both stores, quantized to 4 bits on load.
  const std::string dir = test::test_fixture("models/qwen3");
  const formats::WeightStore file_store = formats::WeightStore::open(dir);
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : file_store.names()) tensors[name] = file_store.get(name);
  model::LoadOptions options;
  options.quantize = formats::QuantParams{4, 64};
  auto from_dir = model::load_model(dir, options);
  const Json config = read_json_file(dir + "/config.json");
  auto from_memory =
      model::load_model(config, formats::WeightStore::from_tensors(tensors), options);
  EXPECT_EQ(from_memory->info().quantization, from_dir->info().quantization);
  const HostTensor a = logits_of(*from_dir), b = logits_of(*from_memory);
  EXPECT_EQ(std::memcmp(a.as<float>(), b.as<float>(), a.view().nbytes()), 0);
  // The options are part of the identity: the same tensors unquantized are another model.
  EXPECT_NE(model::load_model(config, formats::WeightStore::from_tensors(tensors))->fingerprint(),
            from_memory->fingerprint());
}

TEST(InMemoryLoad, RejectsAConfigOverrideAndReportsMissingTensors) {
  const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(tiny_dense());
  model::LoadOptions options;
  options.config_override = "{}";
  test::expect_error(
      [&] {
        model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), options);
      },
      ErrorKind::kInvalidInput, {"config_override"});
  std::map<std::string, Tensor> partial = ck.tensors;
  partial.erase("model.layers.1.mlp.down_proj.weight");
  test::expect_error(
      [&] { model::load_model(ck.config, formats::WeightStore::from_tensors(partial)); },
      ErrorKind::kNotFound, {"model.layers.1.mlp.down_proj.weight"});
}

// A shared expert of the routed experts' shape and format runs as one more routed expert (its gate
// as one more router row): on the CPU that is the same arithmetic in the same order, so the logits
// are bit-identical to the separate shared expert's (LoadOptions::moe_fold_shared false). A shared
// expert of another size stays separate.
TEST(SyntheticCheckpoint, FoldingTheSharedExpertLeavesTheLogitsBitIdentical) {
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    const model::SyntheticCheckpoint ck =
        model::make_synthetic_checkpoint(test::tiny_hybrid_config(true), {.bits = bits});
    auto folded = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
    model::LoadOptions separate_expert;
    separate_expert.moe_fold_shared = false;
    auto separate = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors),
                                      separate_expert);
    EXPECT_EQ(folded->info().moe_shared_folded, 4);
    EXPECT_EQ(separate->info().moe_shared_folded, 0);
    EXPECT_EQ(folded->fingerprint(), separate->fingerprint());
    const HostTensor a = logits_of(*folded), b = logits_of(*separate);
    ASSERT_EQ(a.numel(), b.numel());
    EXPECT_EQ(std::memcmp(a.as<float>(), b.as<float>(), a.view().nbytes()), 0);
  }
  Json wider = test::tiny_hybrid_config(true);
  wider["text_config"]["shared_expert_intermediate_size"] = 128;
  const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(wider, {.bits = 4});
  EXPECT_EQ(model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors))->info().moe_shared_folded, 0);
}

TEST(SyntheticCheckpoint, UsesTheMlxLayoutWithEightBitRouters) {
  const model::SyntheticCheckpoint ck =
      model::make_synthetic_checkpoint(test::tiny_hybrid_config(true), {.bits = 4});
  const std::string p = "language_model.model.layers.0.";
  // Stacked experts [E, I, H·bits/32] with bf16 scales per group of 64.
  EXPECT_EQ(ck.tensors.at(p + "mlp.switch_mlp.gate_proj.weight").shape, (Shape{8, 64, 16}));
  EXPECT_EQ(ck.tensors.at(p + "mlp.switch_mlp.gate_proj.scales").shape, (Shape{8, 64, 2}));
  EXPECT_EQ(ck.tensors.at(p + "mlp.switch_mlp.gate_proj.scales").dtype, DType::kBF16);
  EXPECT_EQ(ck.tensors.at(p + "mlp.gate.weight").shape, (Shape{8, 32}));  // 8 bits
  EXPECT_EQ(ck.config["quantization"][p + "mlp.gate"]["bits"], 8);
  EXPECT_EQ(ck.config["quantization"][p + "mlp.shared_expert_gate"]["bits"], 8);
  EXPECT_EQ(ck.config["quantization"]["bits"], 4);
  EXPECT_EQ(ck.tensors.at(p + "linear_attn.conv1d.weight").shape, (Shape{256, 4, 1}));
  EXPECT_TRUE(ck.tensors.contains("language_model.lm_head.weight"));
  size_t total = 0;
  for (const auto& [name, t] : ck.tensors) total += t.nbytes();
  EXPECT_EQ(ck.nbytes, total);
  // Different tensors get different codes.
  const Tensor& a = ck.tensors.at(p + "mlp.shared_expert.gate_proj.weight");
  const Tensor& b = ck.tensors.at(p + "mlp.shared_expert.up_proj.weight");
  EXPECT_NE(std::memcmp(a.data, b.data, a.nbytes()), 0);
}

}  // namespace
}  // namespace strata
