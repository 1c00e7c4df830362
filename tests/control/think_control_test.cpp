// Think control through the real Engine loop, driven by a scripted model: the thinking budget, loops
// of period 6 and 30 (exact and near) escaped with the task's hint, no false alarm on 10K+ tokens of
// real prose, the answer-phase loop guard, the router, and the reasoning/content split a client
// sees after an injection (Qwen3 tokenizer with its <think> tokens, streaming detokenizer, output
// parser).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "control/think_control.h"
#include "core/mmap.h"
#include "runtime/engine.h"
#include "runtime/scripted_model.h"
#include "test_util.h"
#include "text/chat/output_parser.h"
#include "text/tokenizer.h"

namespace strata::control {
namespace {

using runtime::FinishReason;

// Token ids in the scripted vocabulary.
constexpr int32_t kOpen = 90, kClose = 91, kEos = 99, kAnswer = 50;
constexpr int64_t kVocab = 100;

std::vector<int32_t> escape_tokens() { return {kClose, 80, 81}; }  // "</think>\n\n" + a two-token hint

ThinkSettings settings(int64_t thinking_budget, int64_t answer_budget) {
  ThinkSettings s;
  s.starts_in_reasoning = true;
  s.think_open = kOpen;
  s.think_close = kClose;
  s.max_thinking_tokens = thinking_budget;
  s.max_answer_tokens = answer_budget;
  s.escape_tokens = escape_tokens();
  s.loop = ThinkControlConfig::defaults().loop;
  s.answer_loop = ThinkControlConfig::defaults().answer_loop;
  return s;
}

// Thinks with `thinking(i)` for the i-th thinking token until it sees </think>; then answers with
// kAnswer, kAnswer + 1, ... and ends with kEos after `answer_len` tokens.
std::unique_ptr<test::ScriptedModel> thinker(std::function<int32_t(int64_t)> thinking, int64_t answer_len) {
  return std::make_unique<test::ScriptedModel>(kVocab, [=](std::span<const int32_t> seen) {
    int64_t close_at = -1;
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i] == kClose) close_at = static_cast<int64_t>(i);
    if (close_at < 0) return thinking(static_cast<int64_t>(seen.size()) - 1);  // prompt is one token
    const int64_t answered = static_cast<int64_t>(seen.size()) - 1 - close_at;
    return answered >= answer_len ? kEos : static_cast<int32_t>(kAnswer + answered % 10);
  });
}

struct Outcome {
  runtime::GenerationResult result;
  ThinkReport report;
};

Outcome generate(std::unique_ptr<test::ScriptedModel> model, ThinkSettings s) {
  runtime::Engine engine(std::move(model), runtime::EngineOptions{.context_size = 20000});
  ThinkController controller(std::move(s));
  Outcome r{
      engine.generate(test::controlled_request(&controller, controller.engine_max_tokens(), kEos)),
      {}};
  r.report = controller.report();
  return r;
}

// The tokens after the escape text, if it was injected.
std::vector<int32_t> after_escape(const std::vector<int32_t>& t) {
  const auto e = escape_tokens();
  auto it = std::search(t.begin(), t.end(), e.begin(), e.end());
  return it == t.end() ? std::vector<int32_t>{} : std::vector<int32_t>(it + static_cast<long>(e.size()), t.end());
}

// A thinking stream that never repeats: a counter written in base 40 (two tokens per step).
int32_t non_repeating(int64_t i) { return static_cast<int32_t>(i % 2 == 0 ? (i / 2) % 40 : 40 + (i / 80) % 40); }

TEST(ThinkBudget, ClosesThinkingAtTheBudgetAndTheAnswerKeepsItsFullBudget) {
  const Outcome r = generate(thinker(non_repeating, 1000), settings(/*thinking=*/20, /*answer=*/12));
  EXPECT_TRUE(r.report.budget_closed);
  EXPECT_EQ(r.report.reasoning_tokens, 21);  // 20 thinking tokens + the injected </think>
  ASSERT_GE(r.result.tokens.size(), 23u);
  EXPECT_EQ(std::vector<int32_t>(r.result.tokens.begin() + 20, r.result.tokens.begin() + 23), escape_tokens());
  EXPECT_EQ(r.report.answer_tokens, 12);  // the hint (2) + 10 sampled answer tokens
  EXPECT_EQ(after_escape(r.result.tokens).size(), 10u);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kLength);
}

TEST(ThinkBudget, ModelThatClosesOnItsOwnIsLeftAlone) {
  auto model = thinker([](int64_t i) { return i < 5 ? static_cast<int32_t>(10 + i) : kClose; }, 4);
  const Outcome r = generate(std::move(model), settings(100, 50));
  EXPECT_FALSE(r.report.budget_closed);
  EXPECT_FALSE(r.report.loop_escaped);
  EXPECT_EQ(r.result.tokens, (std::vector<int32_t>{10, 11, 12, 13, 14, kClose, 50, 51, 52, 53}));
  EXPECT_EQ(r.result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.result.injected_tokens, 0);
}

TEST(ThinkBudget, ThinkingOffCountsOnlyAnswerTokens) {
  ThinkSettings s = settings(5, 8);
  s.starts_in_reasoning = false;
  auto model = std::make_unique<test::ScriptedModel>(kVocab, [](std::span<const int32_t> seen) {
    return static_cast<int32_t>(10 + seen.size() % 30);
  });
  const Outcome r = generate(std::move(model), s);
  EXPECT_EQ(r.result.tokens.size(), 8u);
  EXPECT_EQ(r.report.reasoning_tokens, 0);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kLength);
}

TEST(ThinkBudget, ModelThatOpensItsOwnThinkBlockIsBudgetedToo) {
  ThinkSettings s = settings(10, 5);
  s.starts_in_reasoning = false;
  const Outcome r = generate(thinker([](int64_t i) { return i == 0 ? kOpen : non_repeating(i); }, 100), s);
  EXPECT_TRUE(r.report.budget_closed);
  EXPECT_EQ(r.result.tokens.front(), kOpen);
  EXPECT_EQ(after_escape(r.result.tokens).size(), 3u);  // 5 answer tokens, 2 of them the hint
}

// Thinks `lead` distinct tokens, then repeats `block` forever.
std::function<int32_t(int64_t)> looping(std::vector<int32_t> block, int64_t lead) {
  return [=](int64_t i) {
    if (i < lead) return non_repeating(i);
    return block[static_cast<size_t>((i - lead) % static_cast<int64_t>(block.size()))];
  };
}

std::vector<int32_t> block_of(int n, int32_t first) {
  std::vector<int32_t> b;
  for (int i = 0; i < n; ++i) b.push_back(first + (i * 7) % n);
  return b;
}

TEST(ThinkLoops, Period6RepeatedThreeTimesIsEscaped) {
  const Outcome r = generate(thinker(looping(block_of(6, 10), 40), 5), settings(10000, 50));
  EXPECT_TRUE(r.report.loop_escaped);
  EXPECT_EQ(r.report.loop.period, 6);
  // Escaped as the third copy completes: 40 + 6·3 tokens of thinking at most.
  EXPECT_LE(r.report.reasoning_tokens, 40 + 18 + 1);
  EXPECT_EQ(after_escape(r.result.tokens), (std::vector<int32_t>{52, 53, 54}));  // the hint was the first two
}

TEST(ThinkLoops, Period30BlockIsEscapedByItsThirdCopy) {
  const Outcome r = generate(thinker(looping(block_of(30, 10), 100), 3), settings(10000, 50));
  EXPECT_TRUE(r.report.loop_escaped);
  EXPECT_EQ(r.report.loop.period, 30);
  EXPECT_LE(r.report.reasoning_tokens, 100 + 90 + 1);
  EXPECT_GT(r.report.reasoning_tokens, 100 + 60);
}

TEST(ThinkLoops, NearRepeatsWithEditsAreCaught) {
  // A 30-token block whose every copy has one token changed, each time in another place.
  const std::vector<int32_t> block = block_of(30, 10);
  auto thinking = [=](int64_t i) -> int32_t {
    if (i < 50) return non_repeating(i);
    const int64_t k = i - 50, copy = k / 30, pos = k % 30;
    if (pos == (copy * 11) % 30) return static_cast<int32_t>(60 + copy % 20);
    return block[static_cast<size_t>(pos)];
  };
  const Outcome r = generate(thinker(thinking, 3), settings(10000, 50));
  EXPECT_TRUE(r.report.loop_escaped);
  EXPECT_EQ(r.report.loop.period, 30);
  EXPECT_LE(r.report.reasoning_tokens, 50 + 30 * 4);
}

TEST(ThinkLoops, NoFalseAlarmOnTenThousandTokensOfProse) {
  auto tok = text::Tokenizer::load(test::shared_fixture("tokenizers/qwen35/tokenizer.json"));
  std::string prose;
  for (const char* f : {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GFDL-1.3",
                        "/usr/share/common-licenses/Apache-2.0"})
    prose += read_file(f);
  const std::vector<int32_t> ids = tok->encode(prose);
  ASSERT_GE(ids.size(), 10000u);
  LoopDetector d(ThinkControlConfig::defaults().loop);
  int64_t alarms = 0;
  for (int32_t id : ids) alarms += d.push(id);
  EXPECT_EQ(alarms, 0) << "first at period " << d.last_match().period;
  // The same detector does fire on that prose once a passage loops.
  const std::vector<int32_t> passage(ids.begin() + 500, ids.begin() + 540);
  for (int i = 0; i < 3; ++i)
    for (int32_t id : passage) alarms += d.push(id);
  EXPECT_GT(alarms, 0);
}

TEST(ThinkLoops, AnswerThatRepeatsItselfIsStopped) {
  // Three thinking tokens, </think>; then the answer the answer cycles through 5 tokens forever.
  auto looping_answer = std::make_unique<test::ScriptedModel>(kVocab, [](std::span<const int32_t> seen) {
    const auto it = std::find(seen.begin(), seen.end(), kClose);
    if (it == seen.end()) return static_cast<int32_t>(seen.size() < 4 ? 10 + seen.size() : kClose);
    return static_cast<int32_t>(50 + (seen.end() - it) % 5);
  });
  const Outcome r = generate(std::move(looping_answer), settings(100, 1000));
  EXPECT_TRUE(r.report.answer_loop_stopped);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kStop);
  EXPECT_LT(r.report.answer_tokens, 40);
}

TEST(EscapeHint, ChosenByTheTask) {
  const ThinkControlConfig& c = ThinkControlConfig::defaults();
  auto task = [&](std::string format, std::string user) {
    return choose_escape(c, TaskSignals{std::move(format), "", std::move(user)}).task;
  };
  EXPECT_EQ(task("json_object", "Who won?"), "json");
  EXPECT_EQ(task("", "Return the fields as JSON."), "json");
  EXPECT_EQ(task("", "Write an SQL query listing the users."), "sql");
  EXPECT_EQ(task("", "Implement a function that reverses a list in Python."), "code");
  EXPECT_EQ(task("", "Translate 'good morning' into German."), "translation");
  EXPECT_EQ(task("text", "Why is the sky blue?"), "answer");
  EXPECT_EQ(choose_escape(c, TaskSignals{"json_schema", "", ""}).hint, "**Final JSON:**\n\n```json\n");
}

TEST(EscapeHint, RulesComeFromConfigData) {
  Json j = Json::parse(R"({"escape": {"close": "</think>\n\n", "rules": [
      {"task": "poem", "prompt_pattern": "(?i)\\bpoem\\b", "hint": "Poem:\n"}],
      "default": {"task": "answer", "hint": "Answer:\n"}}})");
  const ThinkControlConfig c = ThinkControlConfig::from_json(j);
  EXPECT_EQ(choose_escape(c, TaskSignals{"", "", "Write a poem about rain"}).hint, "Poem:\n");
  EXPECT_EQ(choose_escape(c, TaskSignals{"", "", "Write SQL"}).hint, "Answer:\n");
  j["escape"]["rules"][0]["prompt_pattern"] = "(unclosed";
  test::expect_error([&] { ThinkControlConfig::from_json(j); }, ErrorKind::kInvalidInput, {});
}

TEST(EscapeHint, PatternsAreCompiledWithTheConfigAndSharedByItsCopies) {
  const Pattern none;
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.found_in("anything"));
  const Pattern poem("(?i)\\bpoem\\b");
  EXPECT_EQ(poem.source(), "(?i)\\bpoem\\b");
  EXPECT_TRUE(poem.found_in("A POEM, please"));
  EXPECT_FALSE(poem.found_in("poems"));
  EXPECT_FALSE(poem.found_in(""));
  const Pattern copy = poem;  // a copied config (a server's per-request settings) keeps working
  EXPECT_TRUE(copy.found_in("one poem"));
  test::expect_error([] { Pattern bad("(unclosed"); }, ErrorKind::kInvalidInput, {});
}

TEST(RetrievalRouter, TurnsThinkingOnForShortQuestionsOverLongContext) {
  const RouterConfig& r = ThinkControlConfig::defaults().router;
  const std::string long_doc(4000, 'x');
  EXPECT_TRUE(route_thinking_on(r, {"", long_doc, "What year was the treaty signed?"}, false));
  EXPECT_TRUE(route_thinking_on(r, {"", long_doc, "list the authors"}, false));
  EXPECT_FALSE(route_thinking_on(r, {"", long_doc, "What year was the treaty signed?"}, true));  // set by request
  EXPECT_FALSE(route_thinking_on(r, {"", std::string(1000, 'x'), "What year?"}, false));        // short context
  EXPECT_FALSE(route_thinking_on(r, {"", long_doc, std::string(300, 'y') + "?"}, false));       // long message
  EXPECT_FALSE(route_thinking_on(r, {"", long_doc, "Summarise this."}, false));                 // not a question
  RouterConfig off = r;
  off.enabled = false;
  EXPECT_FALSE(route_thinking_on(off, {"", long_doc, "Who?"}, false));
}

TEST(ThinkStreaming, ReasoningAndContentSplitRightAfterAnInjection) {
  auto tok = text::Tokenizer::load(test::shared_fixture("tokenizers/qwen3/tokenizer.json"));
  const int32_t open = tok->token_id("<think>").value(), close = tok->token_id("</think>").value();
  const std::vector<int32_t> thought = tok->encode("Let me check that again. ");
  const std::vector<int32_t> answer = tok->encode("It is 42.");
  const int32_t eos = tok->token_id("<|im_end|>").value();
  auto model = std::make_unique<test::ScriptedModel>(tok->vocab_size(), [&](std::span<const int32_t> seen) {
    const auto it = std::find(seen.begin(), seen.end(), close);
    if (it == seen.end()) return thought[(seen.size() - 1) % thought.size()];  // loops forever
    const size_t after = static_cast<size_t>(seen.end() - it) - 1;
    const size_t hint = tok->encode("\n\n**Final Answer:**\n\n").size();
    return after < hint ? seen.back() : (after - hint < answer.size() ? answer[after - hint] : eos);
  });
  ThinkSettings s;
  s.starts_in_reasoning = true;
  s.think_open = open;
  s.think_close = close;
  s.max_thinking_tokens = 1000;
  s.max_answer_tokens = 100;
  s.escape_tokens = tok->encode(ThinkControlConfig::defaults().close + ThinkControlConfig::defaults().fallback.hint);
  s.loop = ThinkControlConfig::defaults().loop;
  s.answer_loop = ThinkControlConfig::defaults().answer_loop;
  ASSERT_EQ(s.escape_tokens.front(), close);
  ThinkController controller(s);
  runtime::Engine engine(std::move(model), runtime::EngineOptions{.context_size = 4096});
  runtime::GenerationRequest req;
  req.prompt = tok->encode("<|im_start|>assistant\n<think>\n");
  req.sampling.temperature = 0.0f;
  req.stop_ids = {eos};
  req.controller = &controller;
  req.max_tokens = controller.engine_max_tokens();
  text::StreamingDetokenizer detok(*tok);
  text::chat::ParserConfig pc;
  pc.starts_in_reasoning = true;
  text::chat::OutputParser parser(pc);
  std::string reasoning, content;
  engine.generate(req, [&](int32_t id) {
    const auto d = parser.push(detok.push(id));
    reasoning += d.reasoning_content;
    content += d.content;
    return true;
  });
  const auto d = parser.push(detok.flush());
  reasoning += d.reasoning_content;
  content += d.content;
  const auto f = parser.finish();
  reasoning += f.reasoning_content;
  content += f.content;
  EXPECT_TRUE(controller.report().loop_escaped);
  EXPECT_EQ(content, "**Final Answer:**\n\nIt is 42.");
  EXPECT_NE(reasoning.find("Let me check that again."), std::string::npos);
  EXPECT_EQ(reasoning.find("</think>"), std::string::npos);
  EXPECT_EQ(content.find("think>"), std::string::npos);
}

}  // namespace
}  // namespace strata::control
