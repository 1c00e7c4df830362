// The built-in model's chat template and tokenizer (models/strata-demo, tools/train_demo/) against
// the references the goldens were made with: for every golden prompt in
// tests/fixtures/demo/strata-demo.json, strata renders chat_template.jinja to the same text as
// Jinja2 (as transformers does), and strata's tokenizer encodes that text to the same ids as HF
// `tokenizers`; and the model's greedy replies (transformers') parse into reasoning, content and
// tool calls as the server will return them. The model's greedy tokens are checked in
// tests/model/demo_golden_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/mmap.h"
#include "test_util.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer.h"

namespace strata::text::chat {
namespace {

std::string model_dir(const std::string& name) {
  return test::test_fixture("../../models/" + name);
}

const OrderedJson& golden_cases() {
  static const OrderedJson cases =
      OrderedJson::parse(read_file(test::test_fixture("demo/strata-demo.json")))["cases"];
  return cases;
}

ChatRequest request_of(const OrderedJson& c) {
  ChatRequest r;
  r.messages = c["messages"];
  r.tools = c["tools"];
  r.kwargs = c["kwargs"];
  return r;
}

class DemoTemplate : public ::testing::TestWithParam<size_t> {
 protected:
  const OrderedJson& golden() const { return golden_cases()[GetParam()]; }
};

TEST_P(DemoTemplate, RendersLikeJinja2) {
  const ChatTemplate t = ChatTemplate::load(model_dir("strata-demo"));
  EXPECT_EQ(t.render(request_of(golden())).text, golden()["prompt_text"].get<std::string>());
}

TEST_P(DemoTemplate, TokenizesLikeHfTokenizers) {
  for (const char* name : {"strata-demo", "strata-demo-draft"}) {
    const auto tokenizer = Tokenizer::load(model_dir(name));
    EXPECT_EQ(tokenizer->encode(golden()["prompt_text"].get<std::string>()),
              golden()["prompt_ids"].get<std::vector<int32_t>>())
        << name;
  }
}

TEST_P(DemoTemplate, ThinkingDecidesWhereTheOutputStarts) {
  const ChatTemplate t = ChatTemplate::load(model_dir("strata-demo"));
  const RenderedPrompt prompt = t.render(request_of(golden()));
  const bool off = golden()["kwargs"].value("enable_thinking", true) == false;
  EXPECT_EQ(prompt.starts_in_reasoning, !off);
  EXPECT_EQ(t.parser_config(prompt, golden()["tools"]).tool_format, ToolCallFormat::kQwen3Xml);
}

// The reply as the server sees it: generation stops at <|im_end|>, which is not part of the text.
TEST_P(DemoTemplate, GreedyReplyParsesIntoReasoningContentOrToolCall) {
  const std::map<std::string, std::pair<std::string, std::string>> calls = {
      {"tool_call_weather", {"get_weather", R"({"city":"Paris"})"}},
      {"tool_call_dictionary_no_thinking", {"lookup_word", R"({"word":"lantern"})"}},
      {"tool_call_fortune", {"get_fortune", R"({"category":"computers"})"}}};
  const ChatTemplate t = ChatTemplate::load(model_dir("strata-demo"));
  std::string reply = golden()["reply"].get<std::string>();
  ASSERT_TRUE(reply.ends_with("<|im_end|>")) << reply;
  reply.resize(reply.size() - std::string("<|im_end|>").size());
  const ParsedMessage m = OutputParser::parse(
      t.parser_config(t.render(request_of(golden())), golden()["tools"]), reply);
  const bool off = golden()["kwargs"].value("enable_thinking", true) == false;
  EXPECT_EQ(m.reasoning_content.empty(), off) << reply;
  if (auto it = calls.find(golden()["name"].get<std::string>()); it != calls.end()) {
    ASSERT_EQ(m.tool_calls.size(), 1u) << reply;
    EXPECT_EQ(m.tool_calls[0].name, it->second.first);
    EXPECT_EQ(m.tool_calls[0].arguments, it->second.second);
    EXPECT_EQ(m.content, "");
  } else {
    EXPECT_TRUE(m.tool_calls.empty()) << reply;
    EXPECT_NE(m.content, "") << reply;
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, DemoTemplate, ::testing::Range<size_t>(0, golden_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return golden_cases()[info.param]["name"].get<std::string>();
                         });

TEST(DemoTokenizer, HasTheQwen35AddedTokensAfterTheLearnedVocabulary) {
  const auto tokenizer = Tokenizer::load(model_dir("strata-demo"));
  EXPECT_EQ(tokenizer->vocab_size(), 6144);
  const std::vector<std::pair<const char*, bool>> added = {
      {"<|endoftext|>", true}, {"<|im_start|>", true},     {"<|im_end|>", true},
      {"<think>", false},      {"</think>", false},        {"<tool_call>", false},
      {"</tool_call>", false}, {"<tool_response>", false}, {"</tool_response>", false}};
  int32_t id = 6135;
  for (const auto& [text, special] : added) {
    EXPECT_EQ(tokenizer->token_id(text), id) << text;
    EXPECT_EQ(tokenizer->is_special(id), special) << text;
    EXPECT_EQ(tokenizer->encode(text), std::vector<int32_t>{id}) << text;
    ++id;
  }
  const auto eos = tokenizer->eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), 6137), eos.end());  // <|im_end|>
  EXPECT_FALSE(tokenizer->adds_bos());
}

}  // namespace
}  // namespace strata::text::chat
