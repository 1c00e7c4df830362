// On the GPU, speculative greedy decoding gives exactly plain greedy decoding's tokens (and
// logprobs): dense, hybrid and MoE fixtures, random-weight MLX 4-bit checkpoints (the tensor-core
// decode kernels) and strata-demo, with n-gram drafts, every draft rejected, every draft accepted,
// picks on the device (run-ahead on, as by default) and on the host (logprobs), verify steps whose
// rows straddle an attention bound bucket (StepRunner::kKvBucket), and captured graphs. Below the
// engine: a verify step's rows are bit for bit one-token steps' logits. And strata-demo with its
// draft model. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "../model/tiny_configs.h"
#include "backend/memory.h"
#include "batch_check.h"
#include "core/json.h"
#include "formats/safetensors.h"
#include "model/golden.h"
#include "model/synthetic.h"
#include "runtime/engine.h"
#include "runtime/speculative.h"
#include "speculative_check.h"

namespace strata {
namespace {

using runtime::Engine;
using runtime::EngineOptions;
using runtime::GenerationRequest;
using runtime::SpeculativeParams;

using test::ScriptDrafter;

class CudaSpeculativeExactness : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!backend::device_available(Device::kCuda)) GTEST_SKIP() << "no CUDA device";
  }
  static EngineOptions options(bool speculate) {
    EngineOptions o;
    o.context_size = 400;
    o.prefill_chunk = 64;
    o.parallel = 2;
    o.speculative_adaptive = false;  // every step drafts what the drafter proposes
    if (speculate) o.speculative = {SpeculativeParams::Method::kNgram, 7};
    return o;
  }
  std::unique_ptr<model::Model> load() {
    model::LoadOptions o;
    o.device = Device::kCuda;
    const std::string name = GetParam();
    if (name == "strata-demo") return model::load_model(test::test_fixture("../../models/strata-demo"), o);
    if (name.rfind("q4_", 0) != 0) return model::load_model(test::test_fixture("models/" + name), o);
    Json config;
    if (name == "q4_dense") {
      config = test::tiny_llama_config(512, 64, 512);
    } else {
      config = test::tiny_hybrid_tiles_config(false, 512);
    }
    checkpoints_.push_back(model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = 64}));
    const model::SyntheticCheckpoint& ck = checkpoints_.back();
    return model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), o);
  }
  // A repeating prompt of `len` tokens.
  static GenerationRequest request(int64_t vocab, int64_t len, bool logprobs) {
    GenerationRequest r;
    for (int64_t i = 0; i < len; ++i) r.prompt.push_back(static_cast<int32_t>(((i % 13) * 7 + 3) % vocab));
    r.max_tokens = 48;
    r.sampling.temperature = 0.0f;
    if (logprobs) r.top_logprobs = 2;
    return r;
  }
  std::deque<model::SyntheticCheckpoint> checkpoints_;
};

// Prompts of 40 tokens, and of 250 (verify rows cross position 256, where the attention bound of a
// one-token step grows); picks on the device, and on the host with logprobs.
TEST_P(CudaSpeculativeExactness, NgramRejectedAndAcceptedDraftsGiveThePlainTokens) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(true));
  const int64_t V = plain.model().config().vocab_size;
  ASSERT_GE(spec.model().max_verify_tokens(), 2);
  for (int64_t len : {40, 250}) {
    for (bool logprobs : {false, true}) {
      const std::string what = "prompt " + std::to_string(len) + (logprobs ? ", logprobs" : "");
      const GenerationRequest r = request(V, len, logprobs);
      const test::Outcome want = test::run_alone(plain, r);
      const auto ngram = test::run_to_end(spec, r);
      ASSERT_TRUE(ngram->result) << what << ": " << ngram->error;
      EXPECT_EQ(ngram->result->tokens, want.tokens) << what;
      test::expect_same_logprobs(ngram->logprobs, want.logprobs, what);
      EXPECT_GT(ngram->result->speculative.drafted, 0) << what;

      ScriptDrafter wrong(r.prompt.size(), want.tokens, 1, V), right(r.prompt.size(), want.tokens, 0, V);
      GenerationRequest rejected = r, accepted = r;
      rejected.drafter = &wrong;
      accepted.drafter = &right;
      const auto no = test::run_to_end(spec, rejected);
      ASSERT_TRUE(no->result) << what << ": " << no->error;
      EXPECT_EQ(no->result->tokens, want.tokens) << what << ", every draft rejected";
      EXPECT_EQ(no->result->speculative.accepted, 0) << what;
      const auto yes = test::run_to_end(spec, accepted);
      ASSERT_TRUE(yes->result) << what << ": " << yes->error;
      EXPECT_EQ(yes->result->tokens, want.tokens) << what << ", every draft accepted";
      EXPECT_EQ(yes->result->speculative.accepted, yes->result->speculative.drafted) << what;
      test::expect_same_logprobs(yes->logprobs, want.logprobs, what + ", accepted");
    }
  }
}

// Sampled requests (seeded; plain draws on the device, and with penalties on the host), adaptive
// lengths, and self-speculation: the tokens are plain decoding's on the GPU too.
TEST_P(CudaSpeculativeExactness, SampledAdaptiveAndSelfDraftsGiveThePlainTokens) {
  Engine plain(load(), options(false));
  EngineOptions o = options(true);
  o.speculative_adaptive = true;
  Engine spec(load(), o);
  const int64_t V = plain.model().config().vocab_size;
  for (int kind = 0; kind < 4; ++kind) {
    GenerationRequest r = request(V, 60, false);
    const std::string what = "kind " + std::to_string(kind);
    if (kind <= 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 5 + static_cast<uint64_t>(kind);
    }
    if (kind == 1) r.sampling.presence_penalty = 0.5f;
    if (kind == 2) r.speculative.adaptive = false;
    if (kind == 3) r.speculative.method = SpeculativeParams::Method::kSelf;
    const test::Outcome want = test::run_alone(plain, r);
    const auto ngram = test::run_to_end(spec, r);
    ASSERT_TRUE(ngram->result) << what << ": " << ngram->error;
    EXPECT_EQ(ngram->result->tokens, want.tokens) << what;
    ScriptDrafter right(r.prompt.size(), want.tokens, 0, V);
    GenerationRequest accepted = r;
    accepted.drafter = &right;
    accepted.speculative.adaptive = false;
    const auto yes = test::run_to_end(spec, accepted);
    ASSERT_TRUE(yes->result) << what << ": " << yes->error;
    EXPECT_EQ(yes->result->tokens, want.tokens) << what << ", every draft accepted";
    EXPECT_GT(yes->result->speculative.accepted, 0) << what;
    EXPECT_EQ(yes->result->speculative.accepted, yes->result->speculative.drafted) << what;
  }
}

// A verify step's rows against one-token steps on a plain (unpaged) state, and the state after
// keeping each prefix of it.
TEST_P(CudaSpeculativeExactness, VerifyRowsAreOneTokenSteps) {
  auto m = load();
  const int64_t V = m->config().vocab_size;
  const int64_t T = m->max_verify_tokens();
  ASSERT_GE(T, 2);
  const GenerationRequest r = request(V, 30, false);
  test::check_verify_rows(*m, r.prompt, T);
}

// strata-demo with strata-demo-draft on the GPU: the plain tokens, with drafts accepted.
TEST(CudaModelDrafter, StrataDemoDraftGivesThePlainTokens) {
  if (!backend::device_available(Device::kCuda)) GTEST_SKIP() << "no CUDA device";
  model::LoadOptions lo;
  lo.device = Device::kCuda;
  const std::string dir = test::test_fixture("../../models/");
  EngineOptions o;
  o.context_size = 512;
  o.prefill_chunk = 64;
  Engine plain(model::load_model(dir + "strata-demo", lo), o);
  o.draft_model = model::load_model(dir + "strata-demo-draft", lo);
  o.speculative = {SpeculativeParams::Method::kDraft, 4};
  o.speculative_adaptive = false;
  Engine spec(model::load_model(dir + "strata-demo", lo), o);
  const Json goldens = read_json_file(test::test_fixture("demo/strata-demo.json"));
  int64_t accepted = 0;
  for (const Json& c : goldens["cases"]) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.max_tokens = 32;
    r.sampling.temperature = 0.0f;
    const runtime::GenerationResult want = plain.generate(r);
    const runtime::GenerationResult got = spec.generate(r);
    EXPECT_EQ(got.tokens, want.tokens) << c["name"];
    accepted += got.speculative.accepted;
  }
  EXPECT_GT(accepted, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSpeculativeExactness,
                         ::testing::Values("llama", "qwen35", "qwen35_moe", "q4_dense", "q4_hybrid", "strata-demo"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace strata
