// The work budget of an output constraint: a grammar that reads the same text in too many ways
// fails its token mask (or its start state) with a clear error once the budget is spent, at the
// same point whatever was cached before, while the schemas and tool calls real requests send stay
// far under it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "test_util.h"
#include "text/structured/automaton.h"
#include "text/structured/gbnf.h"
#include "text/structured/json_schema.h"
#include "text/structured/token_mask.h"
#include "text/structured/tool_call_grammar.h"
#include "text/tokenizer.h"

namespace strata::text::structured {
namespace {

using OJ = nlohmann::ordered_json;

std::shared_ptr<const Vocabulary> qwen35() {
  static const std::shared_ptr<const Vocabulary> vocab = Vocabulary::from_tokenizer(
      *Tokenizer::load(test::shared_fixture("tokenizers/qwen35/tokenizer.json")));
  return vocab;
}

// Each "a" read doubles the ways to read the text (which closing letter each "a" waits for), so
// the stacks of a state double too: a mask a few letters in would take seconds, then memory.
const char* kDoubling = "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"";

// The number of letters of "aaa..." after which the constraint's mask first fails, and the error;
// -1 when none did within `letters`.
int first_failure(TokenConstraint& c, int letters, std::string& error) {
  std::vector<uint32_t> words(c.vocabulary().words());
  uint32_t state = c.start();
  for (int n = 0; n <= letters; ++n) {
    try {
      c.mask(state, words);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      error = e.what();
      return n;
    }
    state = c.advance(state, "a");
  }
  return -1;
}

TEST(WorkBudget, AnAmbiguousGrammarsMaskFailsOnceTheBudgetIsSpent) {
  TokenConstraint c(compile_gbnf(kDoubling), qwen35());
  std::string error;
  const int failed_at = first_failure(c, 40, error);
  ASSERT_GE(failed_at, 1) << "the budget never tripped";
  EXPECT_LE(failed_at, 20) << "stacks double per letter: the budget trips within a few";
  EXPECT_NE(error.find("too ambiguous"), std::string::npos) << error;
  EXPECT_NE(error.find(std::to_string(Automaton::kWorkBudget)), std::string::npos) << error;
  // Every mask that succeeded stayed within the budget.
  EXPECT_LE(c.stats().max_work, Automaton::kWorkBudget);

  // The same point fails again on the warmed constraint (its transitions cached) and on a fresh one.
  std::string again;
  EXPECT_EQ(first_failure(c, 40, again), failed_at);
  EXPECT_EQ(again, error);
  TokenConstraint fresh(compile_gbnf(kDoubling), qwen35());
  EXPECT_EQ(first_failure(fresh, 40, again), failed_at);
}

// The grammar the last stop named as holding the engine thread for 6 s over 16 letters: eight
// nested repeats of at most 5, each "a" readable at any depth. Its masks now stop at the budget.
TEST(WorkBudget, EightNestedBoundedRepeatsStopAtTheBudget) {
  std::string g = "root ::= ";
  for (int i = 0; i < 8; ++i) g += "(";
  g += "\"a\"";
  for (int i = 0; i < 8; ++i) g += "){0,5}";
  TokenConstraint c(compile_gbnf(g), qwen35());
  std::string error;
  const int failed_at = first_failure(c, 16, error);
  ASSERT_GE(failed_at, 0) << "16 letters of masks and advances all fit the budget";
  EXPECT_NE(error.find("too ambiguous"), std::string::npos) << error;
}

TEST(WorkBudget, AnOperationCostsTheSameColdOrWarm) {
  Automaton a(compile_gbnf(kDoubling));
  a.restart_budget();
  const uint32_t s = a.walk(a.start(), "aaaab");
  const uint64_t cold = a.spent();
  ASSERT_GT(cold, 0u);
  a.restart_budget();
  EXPECT_EQ(a.walk(a.start(), "aaaab"), s);
  EXPECT_EQ(a.spent(), cold) << "a cached transition is charged what it cost";
  // Within one operation a transition is charged once: its table lookups cost no more work.
  a.restart_budget();
  a.walk(a.start(), "aaaab");
  a.walk(a.start(), "aaaab");
  EXPECT_EQ(a.spent(), cold);
}

TEST(WorkBudget, AStartStateTooLargeFailsWhenTheGrammarIsBuilt) {
  // Each of 24 nested rules may end two ways before the first byte: 2^24 stacks at the start.
  std::string nested = "root ::= r0\n";
  for (int i = 0; i < 24; ++i)
    nested += fmt::format("r{} ::= r{} \"x\" | r{} \"y\"\n", i, i + 1, i + 1);
  nested += "r24 ::= \"z\"\n";
  const Grammar g = compile_gbnf(nested);
  const std::string steps = fmt::format("over {} steps", Automaton::kWorkBudget);
  test::expect_error([&] { TokenConstraint c(g, qwen35()); }, ErrorKind::kInvalidInput,
                     {"too ambiguous", steps});
}

TEST(WorkBudget, RealSchemasAndToolCallsStayFarUnderIt) {
  // A JSON schema's masks along a valid text, and the calls of sixty tools of a dozen parameters.
  const OJ schema = OJ::parse(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer","minimum":0},
      "tags":{"type":"array","items":{"type":"string"}},
      "address":{"type":"object","properties":{"city":{"type":"string"},
                 "zip":{"type":"string","pattern":"^[0-9]{5}$"}}}},"required":["name"]})");
  OJ tools = OJ::array();
  for (int t = 0; t < 60; ++t) {
    OJ properties = OJ::object();
    for (int p = 0; p < 12; ++p)
      properties[fmt::format("param_{}", p)] =
          p % 3 == 0   ? OJ{{"type", "string"}}
          : p % 3 == 1 ? OJ{{"type", "integer"}}
                       : OJ{{"type", "array"}, {"items", {{"enum", {"x", "y", "z"}}}}};
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", fmt::format("tool_{}", t)},
                       {"parameters", {{"type", "object"}, {"properties", properties}}}}}});
  }
  struct Case {
    Grammar grammar;
    std::string text;
  };
  const Case cases[] = {
      {compile_json_schema(schema),
       R"({"name": "Ada", "age": 36, "tags": ["x", "yz"], "address": {"city": "London", "zip": "12345"}})"},
      {any_json_object(), R"({"a": [1, 2.5, {"b": null}], "c": "free text \u00e9"})"},
      {tool_call_grammar(tools, ToolCallSyntax::kHermes),
       R"({"name": "tool_7", "arguments": {"param_0": "hi", "param_1": 12, "param_2": ["y"]}}</tool_call>)"},
  };
  for (const Case& k : cases) {
    TokenConstraint c(k.grammar, qwen35());
    std::vector<uint32_t> words(c.vocabulary().words());
    uint32_t state = c.start();
    for (char ch : k.text) {
      c.mask(state, words);
      state = c.advance(state, std::string_view(&ch, 1));
      ASSERT_NE(state, Automaton::kDead) << k.text;
    }
    EXPECT_TRUE(c.accepts(state)) << k.text;
    EXPECT_LT(c.stats().max_work, Automaton::kWorkBudget / 10) << k.text;
  }
}

}  // namespace
}  // namespace strata::text::structured
