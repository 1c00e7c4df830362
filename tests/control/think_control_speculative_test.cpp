// Think control with speculative decoding: strata-demo thinking on its golden chat prompts under a
// small thinking budget, so that the controller closes the reasoning with its injected escape in
// the middle of a verify step's accepted drafts. With n-gram drafts, the draft model and a drafter
// that proposes the plain run's tokens (every draft right, the injection included), the tokens and
// the controller's report are exactly plain decoding's.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/think_control.h"
#include "core/json.h"
#include "runtime/engine.h"
#include "runtime/speculative.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace strata::control {
namespace {

using runtime::SpeculativeParams;

// Proposes the plain run's tokens after the history.
class Oracle final : public runtime::Drafter {
 public:
  Oracle(size_t prompt_len, std::vector<int32_t> want) : prompt_len_(prompt_len), want_(std::move(want)) {}
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override {
    out.clear();
    for (size_t j = history.size() - prompt_len_; static_cast<int64_t>(out.size()) < max && j < want_.size(); ++j)
      out.push_back(want_[j]);
  }

 private:
  size_t prompt_len_;
  std::vector<int32_t> want_;
};

TEST(ThinkControlSpeculative, ABudgetClosesTheReasoningAtThePlainToken) {
  const std::string dir = test::test_fixture("../../models/");
  const auto tokenizer = text::Tokenizer::load(dir + "strata-demo");
  runtime::EngineOptions o;
  o.context_size = 512;
  o.prefill_chunk = 16;
  runtime::Engine plain(model::load_model(dir + "strata-demo"), o);
  o.draft_model = model::load_model(dir + "strata-demo-draft");
  o.speculative_adaptive = false;  // every step drafts
  runtime::Engine spec(model::load_model(dir + "strata-demo"), o);
  ThinkSettings s;
  s.starts_in_reasoning = true;
  s.think_open = *tokenizer->token_id("<think>");
  s.think_close = *tokenizer->token_id("</think>");
  s.max_thinking_tokens = 6;
  s.max_answer_tokens = 20;
  s.escape_tokens = tokenizer->encode("</think>\n\n");
  ASSERT_EQ(s.escape_tokens.front(), s.think_close);
  s.loop = ThinkControlConfig::defaults().loop;
  s.answer_loop = ThinkControlConfig::defaults().answer_loop;
  const Json goldens = read_json_file(test::test_fixture("demo/strata-demo.json"));
  int closed = 0;
  for (const Json& c : goldens["cases"]) {
    const std::string text = c["prompt_text"];
    if (!text.ends_with("<think>\n") || closed == 2) continue;  // prompts that open a think block
    runtime::GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.sampling.temperature = 0.0f;
    r.stop_ids = {*tokenizer->token_id("<|im_end|>")};
    ThinkController plain_controller(s);
    r.controller = &plain_controller;
    r.max_tokens = plain_controller.engine_max_tokens();
    const runtime::GenerationResult want = plain.generate(r);
    closed += plain_controller.report().budget_closed ? 1 : 0;
    Oracle oracle(r.prompt.size(), want.tokens);
    for (int how = 0; how < 3; ++how) {
      ThinkController controller(s);
      runtime::GenerationRequest q = r;
      q.controller = &controller;
      q.speculative.method = how == 0 ? SpeculativeParams::Method::kNgram : SpeculativeParams::Method::kDraft;
      if (how == 2) q.drafter = &oracle;
      const runtime::GenerationResult got = spec.generate(q);
      const std::string what = c["name"].get<std::string>() + " drafter " + std::to_string(how);
      EXPECT_EQ(got.tokens, want.tokens) << what;
      EXPECT_EQ(got.injected_tokens, want.injected_tokens) << what;
      EXPECT_EQ(controller.report().reasoning_tokens, plain_controller.report().reasoning_tokens) << what;
      EXPECT_EQ(controller.report().budget_closed, plain_controller.report().budget_closed) << what;
      if (how == 2) {
        EXPECT_GT(got.speculative.accepted, 0) << what;
      }
    }
  }
  EXPECT_GT(closed, 0) << "some prompt thinks past the budget";
}

}  // namespace
}  // namespace strata::control
