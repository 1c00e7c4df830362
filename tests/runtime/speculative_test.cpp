// Speculative decoding is exact: greedy tokens (and logprobs) with speculation are those of plain
// greedy decoding, on dense, hybrid and MoE golden models, random-weight 4-bit ones and the
// built-in strata-demo: with n-gram drafts, with a drafter that is always wrong (every draft
// rejected) and one that proposes the plain output (every draft accepted), prompts cut into
// several prefill chunks, stop ids, a controller that injects tokens, many requests at once, and
// picks on the host or the device; and with self-speculation (the model's own first layers
// drafting), prompts longer than the drafter's prefill pieces included. Below the engine: a verify
// step's rows are bit for bit the logits of one-token steps, and keeping any prefix of its tokens
// leaves the state of having run just those.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
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
  o.speculative_adaptive = false;
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
    o.speculative_adaptive = false;  // every step drafts what the drafter proposes
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
    r.sampling.temperature = 0.0f;
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
    if (i == 4) {  // a sampled one with penalties speculates beside the greedy ones
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 7;
      r.sampling.presence_penalty = 0.4f;
    }
    if (i == 5) r.speculative.method = SpeculativeParams::Method::kOff;  // and one decodes plainly
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
  EXPECT_EQ(works[4]->result->speculative.method, SpeculativeParams::Method::kNgram);
  EXPECT_EQ(works[5]->result->speculative.method, SpeculativeParams::Method::kOff);
  EXPECT_GT(spec.stats().verify_steps, 0u);
}

// Allows, after each emitted token t, only the ids congruent to t + 1 modulo 3 (and anything
// first): a mask that changes with every token, as a grammar's does.
class ModThree final : public runtime::OutputConstraint {
 public:
  bool allowed(std::span<uint32_t> words) override {
    if (last_ < 0) return false;
    std::fill(words.begin(), words.end(), 0u);
    for (size_t id = 0; id < words.size() * 32; ++id)
      if (static_cast<int32_t>(id % 3) == (last_ + 1) % 3) words[id >> 5] |= 1u << (id & 31);
    return true;
  }
  void on_emitted(int32_t token) override { last_ = token; }

 private:
  int32_t last_ = -1;
};

// Sampled picks (seeded), penalties, a logit bias and a constraint whose mask follows the drafts:
// each verify row is picked as plain decoding picks at its position, taking the random stream's
// numbers in the same order, so the tokens and logprobs are plain decoding's; drafts that are the
// plain tokens are all accepted, shifted ones never.
TEST_P(SpeculativeExactness, SampledAndEditedPicksGiveThePlainTokens) {
  Engine plain(load(), options(false));
  Engine spec(load(), options(true));
  const int64_t V = plain.model().config().vocab_size;
  for (int kind = 0; kind < 4; ++kind) {
    GenerationRequest r = request(V, kind);
    if (kind != 2) {
      r.sampling.temperature = kind == 3 ? 1.3f : 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 11 + static_cast<uint64_t>(kind);
    }
    if (kind >= 1) {
      r.sampling.repetition_penalty = 1.2f;
      r.sampling.presence_penalty = 0.3f;
      r.sampling.logit_bias = {{static_cast<int32_t>(r.prompt[3]), 1.5f}};
    }
    const std::string what = fmt::format("kind {}", kind);
    ModThree plain_mask, ngram_mask, right_mask, wrong_mask;
    if (kind >= 2) r.constraint = &plain_mask;
    const test::Outcome want = test::run_alone(plain, r);
    if (kind >= 2) r.constraint = &ngram_mask;
    const auto ngram = test::run_to_end(spec, r);
    ASSERT_TRUE(ngram->result) << what << ": " << ngram->error;
    EXPECT_EQ(ngram->result->tokens, want.tokens) << what;
    test::expect_same_logprobs(ngram->logprobs, want.logprobs, what);
    for (int32_t shift : {0, 1}) {
      ScriptDrafter script(r.prompt.size(), want.tokens, shift, V);
      GenerationRequest s = r;
      s.drafter = &script;
      if (kind >= 2) s.constraint = shift == 0 ? &right_mask : &wrong_mask;
      const auto got = test::run_to_end(spec, s);
      ASSERT_TRUE(got->result) << what << ": " << got->error;
      EXPECT_EQ(got->result->tokens, want.tokens) << what << ", shift " << shift;
      test::expect_same_logprobs(got->logprobs, want.logprobs, what);
      const runtime::SpeculativeStats& st = got->result->speculative;
      EXPECT_GT(st.drafted, 0) << what;
      EXPECT_EQ(st.accepted, shift == 0 ? st.drafted : 0) << what << ", shift " << shift;
    }
  }
}

// The sampler's distribution of a logits row at this temperature and top_p: softmax of the logits
// over the temperature, cut to the fewest most likely tokens whose total reaches top_p.
std::vector<double> target_distribution(const float* logits, int64_t V, double temperature, double top_p) {
  std::vector<double> p(static_cast<size_t>(V));
  const double top = *std::max_element(logits, logits + V);
  double total = 0.0;
  for (int64_t i = 0; i < V; ++i) total += p[static_cast<size_t>(i)] = std::exp((logits[i] - top) / temperature);
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  double kept = 0.0;
  size_t n = 0;
  while (n < order.size() && kept < top_p * total) kept += p[static_cast<size_t>(order[n++])];
  for (size_t i = n; i < order.size(); ++i) p[static_cast<size_t>(order[i])] = 0.0;
  for (double& x : p) x /= kept;
  return p;
}

// Pearson's statistic of counts against a distribution, cells expecting fewer than 5 draws merged
// into one, and the value it stays under with probability 1 - 1e-4 if the counts follow it
// (Wilson-Hilferty). A draw outside the distribution's support fails at once (infinite statistic).
struct ChiSquare {
  double statistic = 0.0, critical = 0.0;
};
ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  ChiSquare out;
  double merged_expected = 0.0;
  int64_t merged_count = 0, cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * static_cast<double>(n);
    if (p[i] == 0.0 && counts[i] > 0) out.statistic = std::numeric_limits<double>::infinity();
    if (e < 5.0) {
      merged_expected += e, merged_count += counts[i];
      continue;
    }
    const double d = static_cast<double>(counts[i]) - e;
    out.statistic += d * d / e;
    ++cells;
  }
  if (merged_expected > 0.0) {
    const double d = static_cast<double>(merged_count) - merged_expected;
    out.statistic += d * d / std::max(merged_expected, 1e-9);
    ++cells;
  }
  const double df = static_cast<double>(std::max<int64_t>(cells - 1, 1));
  const double z = 3.719;  // the standard normal's 1 - 1e-4 quantile
  const double a = 2.0 / (9.0 * df);
  out.critical = df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
  return out;
}

// Emits `token` instead of the request's first pick, so that every request reaches its verify
// step after the same tokens.
class FirstToken final : public runtime::TokenController {
 public:
  explicit FirstToken(int32_t token) : token_(token) {}
  runtime::ControlDecision on_sampled(int32_t) override {
    runtime::ControlDecision d;
    if (!replaced_) d.keep = false, d.inject = {token_}, replaced_ = true;
    return d;
  }

 private:
  int32_t token_;
  bool replaced_ = false;
};

// Drafts `draft` after the history `after` (and nothing anywhere else).
class OneDraft final : public runtime::Drafter {
 public:
  OneDraft(std::vector<int32_t> after, int32_t draft) : after_(std::move(after)), draft_(draft) {}
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override {
    out.clear();
    if (max > 0 && std::equal(history.begin(), history.end(), after_.begin(), after_.end())) out.push_back(draft_);
  }

 private:
  std::vector<int32_t> after_;
  int32_t draft_;
};

// Sampled speculation keeps the model's distribution: 34,000 seeded requests per setting each
// reach a verify step of [m, d] after the same prompt and first token m, where d is the likeliest
// next token. Row 0's pick (d accepted, or another token) follows p(. | prompt, m), and row 1's, in
// the requests that accepted d, follows p(. | prompt, m, d), each after temperature and top_p
// (chi-square at 1e-4). The statistic is shown to catch a wrong temperature.
TEST(SampledSpeculation, EveryVerifyRowDrawsFromTheModelsDistribution) {
  // One compute thread: a tiny model's steps are too short to share, and a busy machine (ctest
  // runs suites side by side) makes threads that spin for each other slow them a hundredfold.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  EngineOptions o;
  o.context_size = 32;
  o.parallel = 16;
  o.prefix_cache = false;
  o.speculative_adaptive = false;  // (16 requests at once: adaptation would turn speculation off)
  Engine engine(model::load_model(test::test_fixture("models/llama")), o);
  model::Model& m = engine.model();
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> prompt = {5, 17, 42, 7};
  auto logits_after = [&](const std::vector<int32_t>& tokens) {
    runtime::Sequence seq(m, 32);
    HostTensor logits(DType::kF32, {V});
    seq.forward(m, tokens, logits.view(), false);
    return std::vector<float>(logits.as<float>(), logits.as<float>() + V);
  };
  struct Setting {
    float temperature, top_p;
  };
  constexpr int kDraws = 34000;  // per setting: over 100,000 in all
  for (const Setting setting : {Setting{0.7f, 1.0f}, Setting{1.0f, 0.9f}, Setting{1.6f, 0.8f}}) {
    const std::string what = fmt::format("temperature {}, top_p {}", setting.temperature, setting.top_p);
    std::vector<int32_t> history = prompt;
    const std::vector<float> first = logits_after(history);
    const auto first_token = static_cast<int32_t>(std::max_element(first.begin(), first.end()) - first.begin());
    history.push_back(first_token);
    const std::vector<float> row0 = logits_after(history);
    const std::vector<double> p0 = target_distribution(row0.data(), V, setting.temperature, setting.top_p);
    const auto draft = static_cast<int32_t>(std::max_element(p0.begin(), p0.end()) - p0.begin());
    std::vector<int32_t> accepted = history;
    accepted.push_back(draft);
    const std::vector<float> row1 = logits_after(accepted);
    const std::vector<double> p1 = target_distribution(row1.data(), V, setting.temperature, setting.top_p);

    std::vector<int64_t> counts0(static_cast<size_t>(V)), counts1(static_cast<size_t>(V));
    int64_t verified = 0;
    constexpr int kWave = 512;
    for (int start = 0; start < kDraws; start += kWave) {
      std::vector<std::shared_ptr<test::Recorder>> works;
      std::vector<std::unique_ptr<FirstToken>> controllers;
      std::vector<std::unique_ptr<OneDraft>> drafters;
      for (int i = start; i < std::min(kDraws, start + kWave); ++i) {
        GenerationRequest r;
        r.prompt = prompt;
        r.max_tokens = 3;
        r.sampling.temperature = setting.temperature;
        r.sampling.top_p = setting.top_p;
        r.sampling.seed = static_cast<uint64_t>(i);
        controllers.push_back(std::make_unique<FirstToken>(first_token));
        drafters.push_back(std::make_unique<OneDraft>(history, draft));
        r.controller = controllers.back().get();
        r.drafter = drafters.back().get();
        works.push_back(test::recorder_for(r));
        engine.add(works.back());
      }
      while (!engine.idle()) engine.step();
      for (const auto& w : works) {
        ASSERT_TRUE(w->result) << w->error;
        const std::vector<int32_t>& t = w->result->tokens;
        ASSERT_EQ(t.size(), 3u);
        ASSERT_EQ(t[0], first_token);
        ASSERT_EQ(w->result->speculative.steps, 1);
        ++verified;
        ++counts0[static_cast<size_t>(t[1])];
        if (t[1] == draft) ++counts1[static_cast<size_t>(t[2])];
      }
    }
    EXPECT_EQ(verified, kDraws);
    const ChiSquare c0 = chi_square(counts0, p0), c1 = chi_square(counts1, p1);
    std::printf("%s: row 0 chi-square %.1f (critical %.1f), row 1 %.1f (critical %.1f) over %lld draws\n",
                what.c_str(), c0.statistic, c0.critical, c1.statistic, c1.critical,
                static_cast<long long>(std::accumulate(counts1.begin(), counts1.end(), int64_t{0})));
    EXPECT_LT(c0.statistic, c0.critical) << what << ", row 0";
    EXPECT_LT(c1.statistic, c1.critical) << what << ", row 1 (" << counts1[0] << "...)";
    const double acceptance = static_cast<double>(counts0[static_cast<size_t>(draft)]) / kDraws;
    EXPECT_NEAR(acceptance, p0[static_cast<size_t>(draft)], 0.01) << what;
    // The same counts against the distribution of another temperature fail.
    const std::vector<double> wrong = target_distribution(row0.data(), V, setting.temperature * 1.1, setting.top_p);
    const ChiSquare w = chi_square(counts0, wrong);
    EXPECT_GT(w.statistic, w.critical) << what << ": the test cannot tell a 10% hotter temperature";
  }
  omp_set_num_threads(threads);
}

// The cost of verify lengths not measured yet lies on the line through the measured ones.
TEST(StepCosts, MeasuredLengthsAndLinesBetweenThem) {
  runtime::StepCosts costs;
  EXPECT_DOUBLE_EQ(costs.ratio(3), 1.1);  // nothing measured: 5% a draft
  costs.add(1, 0.010);
  costs.add(5, 0.020);
  EXPECT_DOUBLE_EQ(costs.ratio(1), 1.0);
  EXPECT_DOUBLE_EQ(costs.ratio(5), 2.0);
  EXPECT_DOUBLE_EQ(costs.ratio(3), 1.5);
  EXPECT_DOUBLE_EQ(costs.ratio(7), 2.5);
  costs.add(5, 1.0);  // an outlier counts as 3 steps at most
  EXPECT_NEAR(costs.ratio(5), (0.9 * 0.020 + 0.1 * 0.060) / 0.010, 1e-12);
}

// Draft lengths: none where drafts are refused (then a retry now and then), the most where they
// are accepted and verify rows are cheap (a GPU), none where each verify row costs a step (a small
// model on a CPU), and none beside many plain sequences.
TEST(DraftLength, FollowsAcceptanceAndCost) {
  runtime::StepCosts gpu, cpu;
  for (int64_t t = 1; t <= 9; ++t) {
    gpu.add(t, 1.0 + 0.03 * static_cast<double>(t - 1));
    cpu.add(t, static_cast<double>(t));
  }
  runtime::DraftLength refused(8);
  EXPECT_GT(refused.choose(gpu, 0), 0);  // nothing known: try
  for (int i = 0; i < 30; ++i) refused.verified(0, true);
  EXPECT_EQ(refused.choose(gpu, 0), 0);
  int plain = 0;
  while (refused.choose(gpu, 0) == 0 && plain < 1000) refused.plain_step(), ++plain;
  EXPECT_GT(plain, 40);
  EXPECT_LT(plain, 100);
  refused.verified(0, true);
  EXPECT_EQ(refused.choose(gpu, 0), 0);

  runtime::DraftLength accepted(8);
  for (int i = 0; i < 20; ++i) accepted.verified(8, false);
  EXPECT_EQ(accepted.choose(gpu, 0), 8);
  EXPECT_EQ(accepted.choose(cpu, 0), 0);
  EXPECT_EQ(accepted.choose(gpu, 1), 8);   // 1 + 9 tokens for 2.24 steps beats 2 for 1
  EXPECT_EQ(accepted.choose(gpu, 16), 0);  // 25 for 2.24 does not beat 17

  runtime::DraftLength mixed(8);
  for (int i = 0; i < 30; ++i) mixed.verified(2, true);  // 2 of 3 decided drafts accepted
  EXPECT_NEAR(mixed.acceptance(), 2.0 / 3.0, 0.02);
  const int64_t k = mixed.choose(gpu, 0);
  EXPECT_GE(k, 3);
  EXPECT_LE(k, 8);
}

// Adaptive lengths keep plain decoding's tokens and draft less where every draft is refused (how
// much less depends on what a verify step costs here against a plain one: DraftLength's tests
// pin the policy down with given costs).
TEST_P(SpeculativeExactness, AdaptiveLengthsStopDraftingWhereDraftsAreRefused) {
  Engine plain(load(), options(false));
  EngineOptions o = options(false);
  o.speculative_adaptive = true;
  Engine spec(load(), o);
  const int64_t V = plain.model().config().vocab_size;
  GenerationRequest r = request(V);
  r.max_tokens = 60;
  r.top_logprobs = -1;
  const test::Outcome want = test::run_alone(plain, r);
  ScriptDrafter wrong(r.prompt.size(), want.tokens, 1, V);
  r.drafter = &wrong;
  const auto got = test::run_to_end(spec, r);
  ASSERT_TRUE(got->result) << got->error;
  EXPECT_EQ(got->result->tokens, want.tokens);
  const int64_t fixed_steps = static_cast<int64_t>(want.tokens.size()) - 2;  // EveryDraftRejected's
  EXPECT_GT(got->result->speculative.steps, 0);
  EXPECT_LT(got->result->speculative.drafted, 4 * fixed_steps);
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
