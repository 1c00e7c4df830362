// The Engine's generation loop with a TokenController, driven by a scripted model: injected tokens
// are emitted and fed through the model, dropped tokens are replaced, stop decisions end the
// request with their reason, and the hard cap and cancellation still hold.
#include <gtest/gtest.h>

#include <cmath>

#include "model/golden.h"
#include "runtime/engine.h"
#include "scripted_model.h"

namespace strata {
namespace {

using runtime::ControlDecision;
using runtime::Engine;
using runtime::FinishReason;
using runtime::GenerationRequest;

// Counts up: the next token is the last one + 1 (mod 50), so every step is predictable.
std::unique_ptr<test::ScriptedModel> counting_model() {
  return std::make_unique<test::ScriptedModel>(50, [](std::span<const int32_t> seen) {
    return static_cast<int32_t>((seen.back() + 1) % 50);
  });
}

GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

// The EngineControl tests run with and without running ahead (the CPU picks as a GPU does when
// forced): the emitted tokens must be exactly the plain loop's either way.
class EngineControl : public ::testing::TestWithParam<runtime::EngineOptions::RunAhead> {
 protected:
  runtime::EngineOptions options() const {
    runtime::EngineOptions o;
    o.run_ahead = GetParam();
    return o;
  }
};

// Calls a function per sampled token.
struct LambdaController : runtime::TokenController {
  std::function<ControlDecision(int32_t)> fn;
  std::function<std::optional<ControlDecision>(int32_t)> end;  // optional
  std::vector<int32_t> injected;
  ControlDecision on_sampled(int32_t t) override { return fn(t); }
  void on_injected(int32_t t) override { injected.push_back(t); }
  std::optional<ControlDecision> on_end(int32_t t) override { return end ? end(t) : std::nullopt; }
};

TEST_P(EngineControl, WithoutAControllerTheLoopIsPlainGreedy) {
  Engine engine(counting_model(), options());
  const auto r = engine.generate(greedy_request({3}, 5));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
}

TEST_P(EngineControl, InjectedTokensAreEmittedAndSeenByTheModel) {
  Engine engine(counting_model(), options());
  LambdaController c;
  c.fn = [](int32_t t) {
    ControlDecision d;
    if (t == 6) d.inject = {40, 41};
    return d;
  };
  GenerationRequest req = greedy_request({3}, 8);
  req.controller = &c;
  std::vector<int32_t> streamed;
  const auto r = engine.generate(req, [&](int32_t t) {
    streamed.push_back(t);
    return true;
  });
  // After 40, 41 the model continues from 41.
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 6, 40, 41, 42, 43, 44}));
  EXPECT_EQ(streamed, r.tokens);
  EXPECT_EQ(c.injected, (std::vector<int32_t>{40, 41}));
  EXPECT_EQ(r.injected_tokens, 2);
}

TEST_P(EngineControl, DroppedTokenIsReplacedByTheInjection) {
  Engine engine(counting_model(), options());
  LambdaController c;
  c.fn = [](int32_t t) {
    ControlDecision d;
    if (t == 5) {
      d.keep = false;
      d.inject = {20};
    }
    return d;
  };
  GenerationRequest req = greedy_request({3}, 4);
  req.controller = &c;
  EXPECT_EQ(engine.generate(req).tokens, (std::vector<int32_t>{4, 20, 21, 22}));
}

TEST_P(EngineControl, AnEndTokenEndsUnlessTheControllerReplacesIt) {
  Engine engine(counting_model(), options());
  LambdaController c;
  std::vector<int32_t> sampled;
  c.fn = [&](int32_t t) {
    sampled.push_back(t);
    return ControlDecision{};
  };
  int ends = 0;
  c.end = [&](int32_t) -> std::optional<ControlDecision> {
    if (++ends > 1) return std::nullopt;
    ControlDecision d;
    d.keep = false;
    d.inject = {4};
    return d;
  };
  GenerationRequest req = greedy_request({3}, 20);
  req.stop_ids = {6};
  req.controller = &c;
  const auto r = engine.generate(req);
  // The first 6 becomes 4 (the model counts on from it), the second ends the request.
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 4, 5}));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(sampled, (std::vector<int32_t>{4, 5, 5}));  // on_sampled never sees an end token
  EXPECT_EQ(ends, 2);
}

TEST_P(EngineControl, StopDecisionEndsWithItsReason) {
  Engine engine(counting_model(), options());
  LambdaController c;
  c.fn = [](int32_t t) {
    ControlDecision d;
    d.stop = t == 7;
    d.reason = FinishReason::kLength;
    return d;
  };
  GenerationRequest req = greedy_request({3}, 100);
  req.controller = &c;
  const auto r = engine.generate(req);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
}

TEST_P(EngineControl, HardCapCountsInjectedTokensAndCancellationStillWorks) {
  Engine engine(counting_model(), options());
  LambdaController c;
  c.fn = [](int32_t) {
    ControlDecision d;
    d.inject = {1, 1, 1};
    return d;
  };
  GenerationRequest req = greedy_request({3}, 6);
  req.controller = &c;
  EXPECT_EQ(engine.generate(req).tokens.size(), 6u);
  int seen = 0;
  const auto r = engine.generate(req, [&](int32_t) { return ++seen < 2; });
  EXPECT_EQ(r.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 2u);
}

TEST_P(EngineControl, StopIdsEndGenerationWithoutEmitting) {
  Engine engine(counting_model(), options());
  GenerationRequest req = greedy_request({3}, 10);
  req.stop_ids = {6};
  const auto r = engine.generate(req);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
}

INSTANTIATE_TEST_SUITE_P(RunAhead, EngineControl,
                         ::testing::Values(runtime::EngineOptions::RunAhead::kOff,
                                           runtime::EngineOptions::RunAhead::kOn));

int64_t forward_calls(const Engine& engine) {
  return dynamic_cast<const test::ScriptedModel&>(engine.model()).forward_calls();
}

runtime::EngineOptions run_ahead(runtime::EngineOptions::RunAhead mode) {
  runtime::EngineOptions o;
  o.run_ahead = mode;
  return o;
}

// Running ahead queues each token's step before the host reads the token: a stop wastes exactly
// the step after it, and the budget's last token gets no step, as in the plain loop.
TEST(EngineRunAhead, WastesOnlyTheStepAfterAStop) {
  using RunAhead = runtime::EngineOptions::RunAhead;
  GenerationRequest req = greedy_request({3}, 10);
  req.stop_ids = {6};
  Engine plain(counting_model(), run_ahead(RunAhead::kOff)), ahead(counting_model(), run_ahead(RunAhead::kOn));
  EXPECT_EQ(ahead.generate(req).tokens, plain.generate(req).tokens);
  EXPECT_EQ(forward_calls(plain), 3);  // the prompt, then the steps of 4 and 5
  EXPECT_EQ(forward_calls(ahead), 4);  // and the step of 6, queued before 6 was read
  req.stop_ids.clear();
  req.max_tokens = 5;
  EXPECT_EQ(ahead.generate(req).tokens, plain.generate(req).tokens);
  EXPECT_EQ(forward_calls(plain), 3 + 5);  // the prompt and 4 steps: none for the last token
  EXPECT_EQ(forward_calls(ahead), 4 + 5);
}

// A controller's edit undoes the step run ahead (truncate) and feeds what the plain loop feeds; a
// model whose state cannot be truncated does not run ahead under a controller at all.
TEST(EngineRunAhead, ControllerEditsGiveThePlainLoopsTokens) {
  using RunAhead = runtime::EngineOptions::RunAhead;
  LambdaController c;
  c.fn = [](int32_t t) {
    ControlDecision d;
    if (t == 5) d.keep = false, d.inject = {20};
    if (t == 22) d.inject = {30, 31};
    return d;
  };
  GenerationRequest req = greedy_request({3}, 9);
  req.controller = &c;
  const std::vector<int32_t> expected{4, 20, 21, 22, 30, 31, 32, 33, 34};
  for (bool recurrent : {false, true}) {
    auto model = [&] {
      return std::make_unique<test::ScriptedModel>(
          50, [](std::span<const int32_t> seen) { return static_cast<int32_t>((seen.back() + 1) % 50); }, recurrent);
    };
    Engine plain(model(), run_ahead(RunAhead::kOff)), ahead(model(), run_ahead(RunAhead::kOn));
    EXPECT_EQ(plain.generate(req).tokens, expected);
    EXPECT_EQ(ahead.generate(req).tokens, expected) << "recurrent " << recurrent;
    // Run ahead: one step more for each of the two edits (each undone) and none for the last token.
    EXPECT_EQ(forward_calls(ahead), forward_calls(plain) + (recurrent ? 0 : 2)) << "recurrent " << recurrent;
  }
}

// Real models (a dense and a hybrid fixture) through their own forward_device_token: the same
// greedy tokens run ahead as in the plain loop, with and without a stop in the middle.
TEST(EngineRunAhead, RealModelsGiveThePlainLoopsTokens) {
  using RunAhead = runtime::EngineOptions::RunAhead;
  for (const char* name : {"llama", "qwen35"}) {
    const test::Golden g = test::load_golden(name);
    const std::string path = test::test_fixture(std::string("models/") + name);
    Engine plain(model::load_model(path), run_ahead(RunAhead::kOff));
    Engine ahead(model::load_model(path), run_ahead(RunAhead::kOn));
    GenerationRequest req = greedy_request(g.prompt, 10);
    const auto a = plain.generate(req);
    EXPECT_EQ(ahead.generate(req).tokens, a.tokens) << name;
    ASSERT_EQ(a.tokens.size(), 10u);
    req.stop_ids = {a.tokens[5]};
    const auto b = ahead.generate(req);
    EXPECT_EQ(b.tokens, plain.generate(req).tokens) << name;
    EXPECT_EQ(b.finish_reason, FinishReason::kStop) << name;
  }
}

TEST(EngineLogprobs, SampledTokensGetTheModelsLogSoftmaxAndTopAlternatives) {
  Engine engine(counting_model(), {});
  GenerationRequest req = greedy_request({3}, 3);
  req.sampling.temperature = 0.7f;  // sampling parameters do not change the reported distribution
  req.sampling.seed = 1;
  req.top_logprobs = 2;
  std::vector<runtime::TokenLogprob> seen;
  std::vector<int32_t> order;
  req.on_logprob = [&](const runtime::TokenLogprob& lp) {
    seen.push_back(lp);
    order.push_back(-1);
  };
  const auto r = engine.generate(req, [&](int32_t t) {
    order.push_back(t);
    return true;
  });
  ASSERT_EQ(seen.size(), 3u);
  // One-hot logits: 10 for the next token, 0 for the 49 others.
  const double log_z = std::log(std::exp(10.0) + 49.0);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].token, r.tokens[i]);
    EXPECT_NEAR(seen[i].logprob, 10.0 - log_z, 1e-5);
    ASSERT_EQ(seen[i].top.size(), 2u);
    EXPECT_EQ(seen[i].top[0].first, r.tokens[i]);
    EXPECT_NEAR(seen[i].top[1].second, -log_z, 1e-5);
  }
  EXPECT_EQ(order, (std::vector<int32_t>{-1, 4, -1, 5, -1, 6}));  // each logprob precedes its token
}

}  // namespace
}  // namespace strata
