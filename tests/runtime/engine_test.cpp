// The Engine's generation loop with a TokenController, driven by a scripted model: injected tokens
// are emitted and fed through the model, dropped tokens are replaced, stop decisions end the
// request with their reason, and the hard cap and cancellation still hold.
#include <gtest/gtest.h>

#include <cmath>

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

// Calls a function per sampled token.
struct LambdaController : runtime::TokenController {
  std::function<ControlDecision(int32_t)> fn;
  std::vector<int32_t> injected;
  ControlDecision on_sampled(int32_t t) override { return fn(t); }
  void on_injected(int32_t t) override { injected.push_back(t); }
};

TEST(EngineControl, WithoutAControllerTheLoopIsPlainGreedy) {
  Engine engine(counting_model(), {});
  const auto r = engine.generate(greedy_request({3}, 5));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
}

TEST(EngineControl, InjectedTokensAreEmittedAndSeenByTheModel) {
  Engine engine(counting_model(), {});
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

TEST(EngineControl, DroppedTokenIsReplacedByTheInjection) {
  Engine engine(counting_model(), {});
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

TEST(EngineControl, StopDecisionEndsWithItsReason) {
  Engine engine(counting_model(), {});
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

TEST(EngineControl, HardCapCountsInjectedTokensAndCancellationStillWorks) {
  Engine engine(counting_model(), {});
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

TEST(EngineControl, StopIdsEndGenerationWithoutEmitting) {
  Engine engine(counting_model(), {});
  GenerationRequest req = greedy_request({3}, 10);
  req.stop_ids = {6};
  const auto r = engine.generate(req);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
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
