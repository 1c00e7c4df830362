// JSON the chat layer parses from outside, nested 100,000 deep: model output in every tool-call
// format is "not a call" (never a crash), a client's tool-call arguments and a model's
// tokenizer_config.json are clear errors. Nesting within the limit still works.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "test_util.h"
#include "text/chat/chat_template.h"
#include "text/chat/output_parser.h"

namespace strata::text::chat {
namespace {

std::string deep_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string deep_object(size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += "{\"a\":";
  return text + "1" + std::string(depth, '}');
}

ParserConfig config(ToolCallFormat format) {
  ParserConfig c;
  c.tool_format = format;
  c.parse_reasoning = false;
  c.tools = OrderedJson::parse(R"([{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {"x": {"type": "object"}}}}}])");
  c.make_call_id = [] { return std::string("call_0"); };
  return c;
}

// The text of one call of f with `args` as its arguments, in each format that carries JSON.
struct Written {
  ToolCallFormat format;
  std::string text;
};

std::vector<Written> calls_with(const std::string& args) {
  return {
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": " + args + "}</tool_call>"},
      {ToolCallFormat::kLlama3, "{\"name\": \"f\", \"parameters\": " + args + "}"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": " + args + "}]"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]" + args},
      {ToolCallFormat::kQwen3Xml, "<tool_call>\n<function=f>\n<parameter=x>\n" + args +
                                      "\n</parameter>\n</function>\n</tool_call>"},
  };
}

TEST(HostileJson, DeepModelOutputIsNotACall) {
  for (const Written& w : calls_with(deep_object(100'000))) {
    const ParsedMessage m = OutputParser::parse(config(w.format), w.text);
    if (w.format == ToolCallFormat::kQwen3Xml) {
      // The value is not JSON within the limits, so the schema's object type does not take it:
      // it stays the text it was.
      ASSERT_EQ(m.tool_calls.size(), 1u);
      EXPECT_EQ(OrderedJson::parse(m.tool_calls[0].arguments)["x"], deep_object(100'000));
    } else {
      EXPECT_TRUE(m.tool_calls.empty()) << tool_call_format_name(w.format);
      EXPECT_FALSE(m.content.empty()) << tool_call_format_name(w.format);
    }
  }
}

TEST(HostileJson, ModelOutputWithinTheLimitIsStillACall) {
  // 61 levels inside the arguments object: 63 or 64 levels in all, as the format wraps it.
  const std::string args = "{\"x\": " + deep_arrays(61) + "}";
  for (const Written& w : calls_with(args)) {
    if (w.format == ToolCallFormat::kQwen3Xml) continue;  // its value is one level less deep
    const ParsedMessage m = OutputParser::parse(config(w.format), w.text);
    ASSERT_EQ(m.tool_calls.size(), 1u) << tool_call_format_name(w.format);
    EXPECT_EQ(OrderedJson::parse(m.tool_calls[0].arguments), OrderedJson::parse(args));
  }
}

TEST(HostileJson, DeepToolCallArgumentsFromAClientAreInvalidInput) {
  for (const std::string& deep : {deep_arrays(100'000), deep_arrays(65)}) {
    const OrderedJson messages = {
        {{"role", "assistant"},
         {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", deep}}}}}}}};
    test::expect_error(
        [&] { normalize_messages(messages, false); }, ErrorKind::kInvalidInput,
        {"messages[0].tool_calls[0].function.arguments is refused", "nests deeper than 64 levels"});
  }
  const OrderedJson ok = {
      {{"role", "assistant"},
       {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", deep_arrays(64)}}}}}}}};
  EXPECT_TRUE(
      normalize_messages(ok, false)[0]["tool_calls"][0]["function"]["arguments"].is_array());
}

TEST(HostileJson, DeepTokenizerConfigIsAClearError) {
  const std::string dir = test::scratch_dir("hostile_tokenizer_config");
  std::ofstream(dir + "/tokenizer_config.json")
      << "{\"chat_template\": \"x\", \"extra\": " << deep_arrays(100'000) << "}";
  test::expect_error([&] { ChatTemplate::load(dir); }, ErrorKind::kInvalidInput,
                     {"tokenizer_config.json: JSON nests deeper than 64 levels"});
}

}  // namespace
}  // namespace strata::text::chat
