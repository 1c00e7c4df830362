// Model::first_layers, the self-speculation drafter's model: a view of a model's first L layers,
// then its final norm and head, computes exactly what a model loaded with only those L layers'
// weights computes (the same checkpoint's config cut to L layers), bit for bit on the CPU, for a
// prompt of many tokens and the one-token steps after it; its states hold only those layers'
// buffers, and its fingerprint is its own. Layer counts outside [1, layers) are refused, and so is
// a model that cannot make a view.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "model/tiny_configs.h"
#include "one_hot_model.h"
#include "test_util.h"

namespace strata {
namespace {

// config.json (a nested text_config's, where there is one) cut to its first `layers` layers: their
// kinds, and the dense-FFN layers among them.
Json cut_to(Json config, int64_t layers) {
  Json& text = config.contains("text_config") ? config["text_config"] : config;
  text["num_hidden_layers"] = layers;
  if (text.contains("layer_types")) {
    Json kinds = Json::array();
    for (int64_t l = 0; l < layers; ++l)
      kinds.push_back(text["layer_types"][static_cast<size_t>(l)]);
    text["layer_types"] = kinds;
  }
  if (text.contains("mlp_only_layers")) {
    Json dense = Json::array();
    for (const Json& l : text["mlp_only_layers"])
      if (l.get<int64_t>() < layers) dense.push_back(l);
    text["mlp_only_layers"] = dense;
  }
  return config;
}

class FirstLayers : public ::testing::TestWithParam<const char*> {
 protected:
  // The model named by the test's parameter: a golden fixture under tests/fixtures/models, or
  // "q4_dense" / "q4_hybrid" / "q4_moe" (random-weight MLX 4-bit checkpoints); with `layers`,
  // the same checkpoint loaded with its config cut to that many layers.
  std::unique_ptr<model::Model> load(int64_t layers = 0) {
    const std::string name = GetParam();
    if (name.rfind("q4_", 0) == 0) {
      if (checkpoints_.empty()) {
        const Json config = name == "q4_dense" ? test::tiny_llama_config(320, 32, 192)
                                               : test::tiny_hybrid_config(name == "q4_moe");
        checkpoints_.push_back(
            model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = 32}));
      }
      const model::SyntheticCheckpoint& ck = checkpoints_.back();
      return model::load_model(layers > 0 ? cut_to(ck.config, layers) : ck.config,
                               formats::WeightStore::from_tensors(ck.tensors));
    }
    const std::string dir = test::test_fixture("models/" + name);
    model::LoadOptions o;
    if (layers > 0)
      o.config_override = cut_to(read_json_file(dir + "/config.json"), layers).dump(2);
    return model::load_model(dir, o);
  }

  std::deque<model::SyntheticCheckpoint> checkpoints_;  // their memory outlives the models
};

// Every position's logits of a 40-token prompt (a chunked GDN delta rule in the hybrids), then the
// logits of four one-token steps after it.
std::vector<HostTensor> run(model::Model& m) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<int32_t>((i * 29 + 7) % V));
  std::vector<HostTensor> out;
  model::ModelState state = m.new_state(64);
  out.emplace_back(DType::kF32, Shape{static_cast<int64_t>(prompt.size()), V});
  m.forward(prompt, state, out.back().view(), true);
  for (int32_t id : {3, 17, 9, 60}) {
    out.emplace_back(DType::kF32, Shape{V});
    m.forward(std::span<const int32_t>(&id, 1), state, out.back().view(), false);
  }
  return out;
}

TEST_P(FirstLayers, LogitsEqualAModelOfOnlyThoseLayers) {
  const std::unique_ptr<model::Model> full = load();
  const int64_t n = full->config().num_layers;
  ASSERT_GE(n, 2);
  for (int64_t layers : {int64_t{1}, n - 1}) {
    const std::unique_ptr<model::Model> view = full->first_layers(layers);
    const std::unique_ptr<model::Model> cut = load(layers);
    ASSERT_EQ(view->config().num_layers, layers);
    const std::vector<HostTensor> got = run(*view), want = run(*cut), whole = run(*full);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(got[i].view().data, want[i].view().data, want[i].view().nbytes()))
          << layers << " layers, step " << i;
      EXPECT_NE(0, std::memcmp(got[i].view().data, whole[i].view().data, want[i].view().nbytes()))
          << layers << " layers, step " << i << ": the full model's logits";
    }
  }
}

TEST_P(FirstLayers, StatesHoldOnlyThoseLayersAndTheFingerprintIsItsOwn) {
  const std::unique_ptr<model::Model> full = load();
  const int64_t n = full->config().num_layers;
  const std::unique_ptr<model::Model> view = full->first_layers(n - 1),
                                      again = full->first_layers(n - 1);
  const std::unique_ptr<model::Model> cut = load(n - 1);
  const model::ModelState state = view->new_state(16), want = cut->new_state(16);
  ASSERT_EQ(state.buffers.size(), want.buffers.size());
  for (size_t b = 0; b < want.buffers.size(); ++b) {
    EXPECT_EQ(state.buffers[b].name, want.buffers[b].name);
    EXPECT_EQ(state.buffers[b].tensor.shape(), want.buffers[b].tensor.shape());
    EXPECT_EQ(state.buffers[b].token_indexed, want.buffers[b].token_indexed);
  }
  EXPECT_LT(state.buffers.size(), full->new_state(16).buffers.size());
  EXPECT_EQ(view->info().layers, n - 1);
  EXPECT_EQ(view->info().mtp_layers, 0);
  EXPECT_NE(view->fingerprint(), full->fingerprint());
  if (n > 2) {
    EXPECT_NE(view->fingerprint(), full->first_layers(1)->fingerprint());
  }
  EXPECT_EQ(view->fingerprint(), again->fingerprint());
  // A view's own view is the full model's first layers too.
  if (n > 2) {
    const std::unique_ptr<model::Model> nested = view->first_layers(1),
                                        first = full->first_layers(1);
    const std::vector<HostTensor> a = run(*nested), b = run(*first);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(0, std::memcmp(a[i].view().data, b[i].view().data, a[i].view().nbytes())) << i;
  }
}

TEST_P(FirstLayers, RefusesLayerCountsOutsideOneToFewerThanAll) {
  const std::unique_ptr<model::Model> full = load();
  const int64_t n = full->config().num_layers;
  for (int64_t layers : {int64_t{0}, int64_t{-1}, n, n + 1})
    test::expect_error([&] { (void)full->first_layers(layers); }, ErrorKind::kInvalidInput,
                       {"first " + std::to_string(layers) + " layers"});
}

INSTANTIATE_TEST_SUITE_P(Models, FirstLayers,
                         ::testing::Values("llama", "qwen3", "qwen35", "qwen35_moe", "qwen3_next",
                                           "q4_dense", "q4_hybrid", "q4_moe"));

// A model that has no view of its first layers says so.
TEST(FirstLayersDefault, RefusesAsUnsupported) {
  class NoLayers final : public test::OneHotModel {
   public:
    NoLayers() : OneHotModel(8, "none") {}
    model::ModelState new_state(int64_t) const override { return {}; }
    void forward(std::span<const int32_t>, model::ModelState&, const Tensor&, bool) override {}
  };
  NoLayers m;
  test::expect_error([&] { (void)m.first_layers(1); }, ErrorKind::kUnsupported, {"first layers"});
}

}  // namespace
}  // namespace strata
