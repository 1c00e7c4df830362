// Speculative decoding is exact: greedy tokens (and logprobs) with speculation are those of plain
// greedy decoding, on dense, hybrid and MoE golden models, random-weight 4-bit ones and the
// built-in strata-demo: with n-gram drafts, with a drafter that is always wrong (every draft
// rejected) and one that proposes the plain output (every draft accepted), prompts cut into
// several prefill chunks, stop ids, a controller that injects tokens, many requests at once, and
// picks on the host or the device; and with self-speculation (the model's own first layers
// drafting), prompts longer than the drafter's prefill pieces included. Below the engine: a verify
// step's rows are bit for bit the logits of one-token steps, and keeping any prefix of its tokens
// leaves the state of having run just those.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "../model/tiny_configs.h"
#include "batch_check.h"
#include "formats/safetensors.h"
#include "model/golden.h"
#include "model/synthetic.h"
#include "core/json.h"
#include "runtime/engine.h"
#include "runtime/speculative.h"
#include "speculative_check.h"

namespace strata {
namespace {

using runtime::Engine;
using runtime::EngineOptions;
using runtime::GenerationRequest;
using runtime::GenerationResult;
using runtime::SpeculativeParams;

using test::ScriptDrafter;

// Injects two tokens after the request's 5th and stops after its 17th: what think control does.
class Injector final : public runtime::TokenController {
 public:
  explicit Injector(int64_t vocab) : vocab_(vocab) {}
  runtime::ControlDecision on_sampled(int32_t token) override {
    runtime::ControlDecision d;
    ++seen_;
    if (seen_ == 5) d.inject = {static_cast<int32_t>((token + 1) % vocab_), static_cast<int32_t>((token + 2) % vocab_)};
    if (seen_ == 17) d.stop = true;
    return d;
  }

 private:
  int64_t vocab_;
  int seen_ = 0;
};

// strata-demo with its draft model, strata-demo-draft, on the golden chat prompts: the tokens are
// plain decoding's, and the draft (trained to agree) has drafts accepted and rejected, so its own
// state goes back to the agreed point again and again.
TEST(ModelDrafter, StrataDemoDraftGivesThePlainTokens) {
  const std::string dir = test::test_fixture("../../models/");
  EngineOptions o;
  o.context_size = 512;
  o.prefill_chunk = 16;
  Engine plain(model::load_model(dir + "strata-demo"), o);
  o.draft_model = model::load_model(dir + "strata-demo-draft");
  o.speculative = {SpeculativeParams::Method::kDraft, 4};
  Engine spec(model::load_model(dir + "strata-demo"), o);
  const Json goldens = read_json_file(test::test_fixture("demo/strata-demo.json"));
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < 4; ++i) {  // (the CPU's time: four of the ten)
    const Json& c = goldens["cases"][i];
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.max_tokens = 32;
    r.sampling.temperature = 0.0f;
    const GenerationResult want = plain.generate(r);
    const GenerationResult got = spec.generate(r);
    EXPECT_EQ(got.tokens, want.tokens) << c["name"];
    EXPECT_EQ(got.speculative.method, SpeculativeParams::Method::kDraft);
    drafted += got.speculative.drafted;
    accepted += got.speculative.accepted;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  // A request may ask for the draft model only where the engine has one.
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.speculative.method = SpeculativeParams::Method::kDraft;
  EXPECT_THROW(plain.generate(r), Error);
}

// The longest recent suffix found earlier proposes what followed it there, its most recent place
// first; no earlier match, no drafts.
TEST(NgramDrafter, ProposesWhatFollowedTheLongestSuffixFoundEarlier) {
  runtime::NgramDrafter drafter;
  std::vector<int32_t> out;
  const std::vector<int32_t> h1 = {1, 2, 3, 4, 9, 2, 3, 5, 1, 2, 3};
  drafter.propose(h1, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 9, 2}));  // "1 2 3" beats the later "2 3"
  drafter.propose(h1, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 9, 2, 3, 5, 1, 2, 3}));  // up to the history's end
  const std::vector<int32_t> h2 = {7, 8, 6, 7, 5, 7};
  drafter.propose(h2, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 7}));  // "7": its most recent earlier place
  const std::vector<int32_t> h3 = {1, 2, 3, 4};
  drafter.propose(h3, 4, out);
  EXPECT_TRUE(out.empty());
  drafter.propose(h1, 0, out);
  EXPECT_TRUE(out.empty());
}

struct Case {
  const char* model;
  EngineOptions::RunAhead run_ahead;  // kOn: picks on the device (backend::argmax), as a GPU
};

class SpeculativeExactness : public ::testing::TestWithParam<Case> {
 protected:
  EngineOptions options(bool speculate, int64_t parallel = 1) const {
    EngineOptions o;
    o.context_size = 160;
    o.prefill_chunk = 8;  // prompts take several chunks
    o.kv_block_tokens = 8;  // and verify steps cross blocks
    o.parallel = parallel;
    o.run_ahead = GetParam().run_ahead;
    if (speculate) o.speculative = {SpeculativeParams::Method::kNgram, 4};
    return o;
  }
  // A fixture's name, "q4_dense" / "q4_hybrid" / "q4_moe" (random-weight MLX 4-bit), or a
  // built-in model under models/.
  std::unique_ptr<model::Model> load() {
    const std::string name = GetParam().model;
    if (name.rfind("strata-demo", 0) == 0) return model::load_model(test::test_fixture("../../models/" + name));
    if (name.rfind("q4_", 0) != 0) return model::load_model(test::test_fixture("models/" + name));
    const Json config = name == "q4_dense" ? test::tiny_llama_config(320, 32, 192) : test::tiny_hybrid_config(name == "q4_moe");
    checkpoints_.push_back(model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = 32}));
    const model::SyntheticCheckpoint& ck = checkpoints_.back();
    return model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
  }
  // A prompt of 29 tokens (four prefill chunks) that repeats itself, so n-gram lookup finds drafts.
  std::vector<int32_t> prompt(int64_t vocab, int salt = 0) const {
    std::vector<int32_t> p;
    for (int i = 0; i < 29; ++i) p.push_back(static_cast<int32_t>((i % 11) * 7 + 3 + salt) % vocab);
    return p;
  }
  GenerationRequest request(int64_t vocab, int salt = 0) const {
    GenerationRequest r;
    r.prompt = prompt(vocab, salt);
    r.max_tokens = 40;
    r.sampling.temperature = 0.0f;  // greedy: what speculates
    r.top_logprobs = 2;
    return r;
  }

  std::deque<model::SyntheticCheckpoint> checkpoints_;  // their memory outlives the models
};

TEST_P(SpeculativeExactness, NgramDraftsGiveThePlainTokensAndLogprobs) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(true));
  const int64_t V = plain.model().config().vocab_size;
  for (int salt : {0, 5}) {
    const GenerationRequest r = request(V, salt);
    const test::Outcome want = test::run_alone(plain, r);
    const auto got = test::run_to_end(spec, r);
    ASSERT_TRUE(got->result) << got->error;
    EXPECT_EQ(got->result->tokens, want.tokens) << "salt " << salt;
    test::expect_same_logprobs(got->logprobs, want.logprobs, "ngram");
    const runtime::SpeculativeStats& s = got->result->speculative;
    EXPECT_EQ(s.method, SpeculativeParams::Method::kNgram);
    EXPECT_GT(s.drafted, 0) << "the repeating prompt gives the n-gram drafter something to propose";
    EXPECT_LE(s.accepted, s.drafted);
  }
  // A request may turn it off: then nothing is drafted.
  GenerationRequest off = request(V);
  off.speculative.method = SpeculativeParams::Method::kOff;
  const GenerationResult r = spec.generate(off);
  EXPECT_EQ(r.speculative.method, SpeculativeParams::Method::kOff);
  EXPECT_EQ(r.speculative.drafted, 0);
}

TEST_P(SpeculativeExactness, EveryDraftRejected) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(false));
  const int64_t V = plain.model().config().vocab_size;
  GenerationRequest r = request(V);
  const test::Outcome want = test::run_alone(plain, r);
  ScriptDrafter wrong(r.prompt.size(), want.tokens, 1, V);
  r.drafter = &wrong;
  const auto got = test::run_to_end(spec, r);
  ASSERT_TRUE(got->result) << got->error;
  EXPECT_EQ(got->result->tokens, want.tokens);
  test::expect_same_logprobs(got->logprobs, want.logprobs, "rejected");
  EXPECT_GT(got->result->speculative.drafted, 0);
  EXPECT_EQ(got->result->speculative.accepted, 0);
  // One verify step per token but the first (the prompt's pick) and the last (no room for a draft).
  EXPECT_EQ(got->result->speculative.steps, static_cast<int64_t>(want.tokens.size()) - 2);
}

TEST_P(SpeculativeExactness, EveryDraftAccepted) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(false));
  const int64_t V = plain.model().config().vocab_size;
  GenerationRequest r = request(V);
  const test::Outcome want = test::run_alone(plain, r);
  ScriptDrafter right(r.prompt.size(), want.tokens, 0, V);
  r.drafter = &right;
  r.speculative.draft_max = 5;
  const auto got = test::run_to_end(spec, r);
  ASSERT_TRUE(got->result) << got->error;
  EXPECT_EQ(got->result->tokens, want.tokens);
  test::expect_same_logprobs(got->logprobs, want.logprobs, "accepted");
  const runtime::SpeculativeStats& s = got->result->speculative;
  EXPECT_EQ(s.method, SpeculativeParams::Method::kCustom);
  EXPECT_GT(s.drafted, 0);
  EXPECT_EQ(s.accepted, s.drafted);
  // 39 tokens after the first, 6 a step (the fed token's pick and 5 drafts).
  EXPECT_EQ(s.steps, (static_cast<int64_t>(want.tokens.size()) - 1 + 5) / 6);
}

TEST_P(SpeculativeExactness, StopIdsAndAnInjectingControllerHoldAsInPlainDecoding) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(false));
  const int64_t V = plain.model().config().vocab_size;
  GenerationRequest base = request(V);
  const test::Outcome free_run = test::run_alone(plain, base);
  ASSERT_GE(free_run.tokens.size(), 30u);
  // A stop id: the plain run's 12th token (it ends at its first occurrence).
  GenerationRequest stop = base;
  stop.stop_ids = {free_run.tokens[11]};
  const test::Outcome want_stop = test::run_alone(plain, stop);
  ScriptDrafter right(base.prompt.size(), free_run.tokens, 0, V);
  stop.drafter = &right;
  const auto got_stop = test::run_to_end(spec, stop);
  ASSERT_TRUE(got_stop->result) << got_stop->error;
  EXPECT_EQ(got_stop->result->tokens, want_stop.tokens);
  EXPECT_EQ(got_stop->result->finish_reason, want_stop.reason);
  // A controller that injects two tokens after the 5th and stops after the 17th: the drafts after
  // the 5th are dropped with the state they advanced.
  Injector plain_controller(V), spec_controller(V);
  GenerationRequest controlled = base;
  controlled.controller = &plain_controller;
  const test::Outcome want_controlled = test::run_alone(plain, controlled);
  controlled.controller = &spec_controller;
  controlled.drafter = &right;
  const auto got_controlled = test::run_to_end(spec, controlled);
  ASSERT_TRUE(got_controlled->result) << got_controlled->error;
  EXPECT_EQ(got_controlled->result->tokens, want_controlled.tokens);
  EXPECT_EQ(got_controlled->result->injected_tokens, 2);
  EXPECT_GT(got_controlled->result->speculative.accepted, 0);
}

TEST_P(SpeculativeExactness, ManyRequestsTogetherEachGetTheirPlainTokens) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(true, 4));
  const int64_t V = plain.model().config().vocab_size;
  std::vector<test::Outcome> want;
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = request(V, i);
    r.max_tokens = 12 + 5 * i;
    if (i == 4) {  // a sampled request decodes plainly beside the speculating ones
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 7;
    }
    want.push_back(test::run_alone(plain, r));
    works.push_back(test::recorder_for(r));
    spec.add(works.back());
  }
  while (!spec.idle()) spec.step();
  for (size_t i = 0; i < works.size(); ++i) {
    ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, want[i].tokens) << "request " << i;
    test::expect_same_logprobs(works[i]->logprobs, want[i].logprobs, "request " + std::to_string(i));
  }
  EXPECT_EQ(works[4]->result->speculative.method, SpeculativeParams::Method::kOff);
  EXPECT_GT(spec.stats().verify_steps, 0u);
}

// Self-speculation: the model's own first layers draft (a quarter of them by default, or as many
// as the request asks), each request on a state of its own over the one view of them, several
// requests at once; the tokens and logprobs are plain decoding's.
TEST_P(SpeculativeExactness, SelfDraftsGiveThePlainTokensAndLogprobs) {
  Engine plain(load(), options(false));
  EngineOptions o = options(false, 3);
  o.speculative = {SpeculativeParams::Method::kSelf, 4};
  Engine spec(load(), o);
  const int64_t V = plain.model().config().vocab_size, n = plain.model().config().num_layers;
  const std::vector<int64_t> layers = {0, 1, n - 1};
  std::vector<test::Outcome> want;
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (size_t i = 0; i < layers.size(); ++i) {
    GenerationRequest r = request(V, static_cast<int>(i));
    r.speculative.layers = layers[i];
    want.push_back(test::run_alone(plain, r));
    works.push_back(test::recorder_for(r));
    spec.add(works.back());
  }
  while (!spec.idle()) spec.step();
  for (size_t i = 0; i < works.size(); ++i) {
    ASSERT_TRUE(works[i]->result) << layers[i] << " layers: " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, want[i].tokens) << layers[i] << " layers";
    test::expect_same_logprobs(works[i]->logprobs, want[i].logprobs,
                               "self, " + std::to_string(layers[i]) + " layers");
    const runtime::SpeculativeStats& s = works[i]->result->speculative;
    EXPECT_EQ(s.method, SpeculativeParams::Method::kSelf);
    EXPECT_GT(s.drafted, 0) << layers[i] << " layers";
    EXPECT_LE(s.accepted, s.drafted);
  }
  // Alone too, and again (the drafter of a new request starts over on the same view).
  const GenerationRequest r = request(V, 7);
  const test::Outcome alone = test::run_alone(plain, r);
  for (int again = 0; again < 2; ++again) {
    const auto got = test::run_to_end(spec, r);
    ASSERT_TRUE(got->result) << got->error;
    EXPECT_EQ(got->result->tokens, alone.tokens) << again;
  }
  // A layer count that leaves no layer out (or none at all) is refused.
  for (int64_t bad : {n, n + 3, int64_t{-1}}) {
    GenerationRequest all = request(V);
    all.speculative.layers = bad;
    EXPECT_THROW(spec.generate(all), Error) << bad;
  }
}

// Below the engine: each row of a verify step is exactly a one-token step's logits, and keeping
// the first n tokens leaves the state of having run exactly those (the next step's logits agree).
TEST_P(SpeculativeExactness, VerifyRowsAreOneTokenStepsAndKeepRestoresTheirState) {
  auto m = load();
  const int64_t V = m->config().vocab_size;
  const int64_t T = std::min<int64_t>(m->max_verify_tokens(), 5);
  ASSERT_GE(T, 2);
  const std::vector<int32_t> p = prompt(V);
  test::check_verify_rows(*m, p, T);
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeExactness,
                         ::testing::Values(Case{"llama", EngineOptions::RunAhead::kOff},
                                           Case{"qwen35", EngineOptions::RunAhead::kOff},
                                           Case{"qwen35_moe", EngineOptions::RunAhead::kOff},
                                           Case{"q4_dense", EngineOptions::RunAhead::kOn},
                                           Case{"q4_hybrid", EngineOptions::RunAhead::kOn},
                                           Case{"strata-demo", EngineOptions::RunAhead::kOff}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name + (info.param.run_ahead == EngineOptions::RunAhead::kOn ? "_DevicePicks" : "");
                         });

// Self-speculation over prompts of several of the engine's prefill chunks and of the drafter's own
// prefill pieces (512 tokens): the tokens are plain decoding's, on a dense and a hybrid model.
TEST(SelfSpeculation, LongPromptsGiveThePlainTokens) {
  for (const char* name : {"llama", "qwen35"}) {
    EngineOptions o;
    o.context_size = 1024;
    o.prefill_chunk = 256;
    Engine plain(model::load_model(test::test_fixture(std::string("models/") + name)), o);
    o.speculative = {SpeculativeParams::Method::kSelf, 4};
    o.self_draft_layers = plain.model().config().num_layers - 1;
    Engine spec(model::load_model(test::test_fixture(std::string("models/") + name)), o);
    const int64_t V = plain.model().config().vocab_size;
    GenerationRequest r;
    for (int i = 0; i < 700; ++i)
      r.prompt.push_back(static_cast<int32_t>((i * 13 % 97 * 5 + 1) % V));
    r.max_tokens = 24;
    r.sampling.temperature = 0.0f;
    const GenerationResult want = plain.generate(r);
    const GenerationResult got = spec.generate(r);
    EXPECT_EQ(got.tokens, want.tokens) << name;
    EXPECT_EQ(got.speculative.method, SpeculativeParams::Method::kSelf) << name;
    EXPECT_GT(got.speculative.drafted, 0) << name;
  }
  // An engine whose own layer count leaves no layer out is refused when it starts.
  EngineOptions o;
  o.speculative = {SpeculativeParams::Method::kSelf, 4};
  o.self_draft_layers = 3;
  EXPECT_THROW(Engine(model::load_model(test::test_fixture("models/llama")), o), Error);
}

}  // namespace
}  // namespace strata
