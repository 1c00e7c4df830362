// The forced answer opening (tool_choice "required" or a named function): directly, token by
// token, and through the real Engine loop with the think controller inside it: reasoning and blank
// tokens pass, the first answer token is kept when it starts the opening and replaced otherwise, an
// end token before the answer is replaced, and everything after the opening is the model's.
#include "control/answer_opening.h"

#include <gtest/gtest.h>

#include "control/think_control.h"
#include "runtime/engine.h"
#include "runtime/scripted_model.h"

namespace strata::control {
namespace {

using runtime::ControlDecision;

// Token ids in the scripted vocabulary.
constexpr int32_t kOpen = 90, kClose = 91, kBlank = 92, kEos = 99;
const std::vector<int32_t> kOpening = {70, 71, 72};

OpeningSettings settings(bool starts_in_reasoning) {
  OpeningSettings s;
  s.opening = kOpening;
  s.blank = [](int32_t id) { return id == kBlank; };
  s.starts_in_reasoning = starts_in_reasoning;
  s.think_open = kOpen;
  s.think_close = kClose;
  return s;
}

bool passes(const ControlDecision& d) { return d.keep && d.inject.empty() && !d.stop; }
bool replaces(const ControlDecision& d) { return !d.keep && d.inject == kOpening && !d.stop; }

TEST(AnswerOpening, TheFirstAnswerTokenIsReplacedAndTheRestPass) {
  AnswerOpening c(settings(false), nullptr);
  EXPECT_TRUE(passes(c.on_sampled(kBlank)));  // whitespace before the answer
  EXPECT_TRUE(replaces(c.on_sampled(10)));
  EXPECT_TRUE(c.replaced());
  for (int32_t t : kOpening) c.on_injected(t);
  EXPECT_TRUE(passes(c.on_sampled(11)));
  EXPECT_TRUE(passes(c.on_sampled(70)));  // the opening's tokens are the model's own from here
  EXPECT_FALSE(c.on_end(kEos).has_value());
}

TEST(AnswerOpening, AModelThatOpensTheCallKeepsItsTokenAndGetsTheRest) {
  AnswerOpening c(settings(false), nullptr);
  const ControlDecision d = c.on_sampled(kOpening.front());
  EXPECT_TRUE(d.keep);
  EXPECT_EQ(d.inject, std::vector<int32_t>(kOpening.begin() + 1, kOpening.end()));
  EXPECT_FALSE(c.replaced());
  EXPECT_TRUE(passes(c.on_sampled(10)));
}

TEST(AnswerOpening, ReasoningPassesAndTheAnswerAfterItOpens) {
  AnswerOpening prompt_opened(settings(true), nullptr);
  for (int32_t t : {10, 11, kBlank, 12, kClose, kBlank})
    EXPECT_TRUE(passes(prompt_opened.on_sampled(t))) << t;
  EXPECT_TRUE(replaces(prompt_opened.on_sampled(13)));

  AnswerOpening model_opened(settings(false), nullptr);
  for (int32_t t : {kOpen, 10, kClose}) EXPECT_TRUE(passes(model_opened.on_sampled(t))) << t;
  EXPECT_TRUE(replaces(model_opened.on_sampled(kOpen)));  // after the block, <think> is answer text
}

TEST(AnswerOpening, AnEndBeforeTheAnswerIsReplacedButNotOneInReasoningOrAfterTheCall) {
  AnswerOpening before(settings(false), nullptr);
  const std::optional<ControlDecision> d = before.on_end(kEos);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(replaces(*d));
  EXPECT_FALSE(before.on_end(kEos).has_value());  // the opening is settled

  AnswerOpening reasoning(settings(true), nullptr);
  EXPECT_FALSE(reasoning.on_end(kEos).has_value());
  reasoning.on_sampled(kClose);
  EXPECT_TRUE(reasoning.on_end(kEos).has_value());
}

// Records what reaches it; escapes (drops the token and injects </think>) at `escape_at`.
struct Inner : runtime::TokenController {
  std::vector<int32_t> sampled, injected;
  int32_t escape_at = -1;
  bool stop_at_first = false;
  ControlDecision on_sampled(int32_t t) override {
    sampled.push_back(t);
    ControlDecision d;
    if (t == escape_at) d.keep = false, d.inject = {kClose};
    if (stop_at_first) d.stop = true;
    return d;
  }
  void on_injected(int32_t t) override { injected.push_back(t); }
};

TEST(AnswerOpening, TheInnerControllerSeesEveryTokenButTheReplacedOne) {
  Inner inner;
  inner.escape_at = 12;
  AnswerOpening c(settings(true), &inner);
  EXPECT_TRUE(passes(c.on_sampled(11)));
  const ControlDecision escape = c.on_sampled(12);  // the inner controller closes the block
  EXPECT_FALSE(escape.keep);
  c.on_injected(kClose);
  EXPECT_TRUE(replaces(c.on_sampled(13)));
  for (int32_t t : kOpening) c.on_injected(t);
  EXPECT_TRUE(passes(c.on_sampled(14)));
  EXPECT_EQ(inner.sampled, (std::vector<int32_t>{11, 12, 14}));
  EXPECT_EQ(inner.injected, (std::vector<int32_t>{kClose, 70, 71, 72}));
}

TEST(AnswerOpening, AnInnerStopOnTheOpeningTokenIsKept) {
  Inner inner;
  inner.stop_at_first = true;  // e.g. the answer budget is spent
  AnswerOpening c(settings(false), &inner);
  const ControlDecision d = c.on_sampled(kOpening.front());
  EXPECT_TRUE(d.stop);
  EXPECT_TRUE(d.inject.empty());
}

// Through the Engine, the think controller inside the opening: the model thinks (10, 11), closes,
// writes a blank, then would answer in prose (50, 51, 52) and end; or it ends right after the
// blank. Either way its first answer token becomes the opening; the replaced token's step is never
// fed, so the model, which counts positions, is at its end token after the opening's three.
TEST(AnswerOpening, ThroughTheEngineWithThinkControl) {
  for (bool ends_at_once : {false, true}) {
    auto model = std::make_unique<test::ScriptedModel>(100, [=](std::span<const int32_t> seen) {
      const std::vector<int32_t> plan = {10, 11, kClose, kBlank, ends_at_once ? kEos : 50,
                                         51, 52, kEos};
      const size_t generated = seen.size() - 1;  // the prompt is one token
      return generated < plan.size() ? plan[generated] : kEos;
    });
    runtime::Engine engine(std::move(model), runtime::EngineOptions{.context_size = 64});
    ThinkSettings ts;  // default loop detectors
    ts.starts_in_reasoning = true;
    ts.think_open = kOpen;
    ts.think_close = kClose;
    ts.escape_tokens = {kClose};
    ThinkController think(std::move(ts));
    AnswerOpening opening(settings(true), &think);
    const runtime::GenerationResult r =
        engine.generate(test::controlled_request(&opening, think.engine_max_tokens(), kEos));
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{10, 11, kClose, kBlank, 70, 71, 72})) << ends_at_once;
    EXPECT_EQ(r.injected_tokens, 3);
    EXPECT_EQ(r.finish_reason, runtime::FinishReason::kStop);
    EXPECT_TRUE(opening.replaced());
    EXPECT_EQ(think.report().reasoning_tokens, 3);
    EXPECT_EQ(think.report().answer_tokens, 4);  // the blank and the three injected
  }
}

}  // namespace
}  // namespace strata::control
