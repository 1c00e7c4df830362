// The output parser on every tool-call format and reasoning style: one-shot results against the
// formats as the models write them, the same text streamed in every split (1-byte pieces, every
// two-piece split, random splits) giving the same result, schema coercion, and malformed text.
#include "text/chat/output_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace strata::text::chat {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Tools as an OpenAI request carries them.
OrderedJson weather_tools() {
  return OrderedJson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"type": "string", "enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
      "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}}}
  ])");
}

// Deterministic call ids, so that two parsers of the same text agree; each parser copies the
// counter.
ParserConfig config(ToolCallFormat format, bool starts_in_reasoning = false) {
  ParserConfig c;
  c.tool_format = format;
  c.starts_in_reasoning = starts_in_reasoning;
  c.tools = weather_tools();
  c.make_call_id = [n = 0]() mutable { return "call_" + std::to_string(n++); };
  return c;
}

ToolCall call(int index, std::string name, std::string arguments) {
  return ToolCall{index, "call_" + std::to_string(index), std::move(name), std::move(arguments)};
}

struct Case {
  std::string name;
  ParserConfig config;
  std::string text;
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> calls;
};

std::vector<Case> cases() {
  const auto qwen35 = config(ToolCallFormat::kQwen3Xml, /*starts_in_reasoning=*/true);
  const auto hermes = config(ToolCallFormat::kHermes);
  const auto llama = config(ToolCallFormat::kLlama3);
  const auto mistral = config(ToolCallFormat::kMistral);
  const auto none = config(ToolCallFormat::kNone);
  auto magistral = config(ToolCallFormat::kMistral);
  magistral.reasoning_tags = {"[THINK]", "[/THINK]"};
  return {
      {"PlainContent",
       none,
       "Hello world.\n\nSecond line.\n",
       "Hello world.\n\nSecond line.\n",
       "",
       {}},
      {"AngleBracketsThatAreNoTags",
       hermes,
       "a < b, <b>bold</b> and <tool>x</tool>",
       "a < b, <b>bold</b> and <tool>x</tool>",
       "",
       {}},
      {"Qwen35ThinkingThenAnswer",
       qwen35,
       "Let me think.\n2+2 is 4.\n</think>\n\nThe answer is 4.",
       "The answer is 4.",
       "Let me think.\n2+2 is 4.",
       {}},
      {"Qwen3ModelOpensThink",
       hermes,
       "<think>\nHmm.\n</think>\n\nHi there!",
       "Hi there!",
       "Hmm.",
       {}},
      {"Qwen35ModelRepeatsTheOpenTag", qwen35, "<think>\nHmm.\n</think>\n\nOK", "OK", "Hmm.", {}},
      {"EmptyThinkBlock", hermes, "<think>\n\n</think>\n\nParis.", "Paris.", "", {}},
      {"UnterminatedThinkStaysReasoning",
       qwen35,
       "Still thinking about",
       "",
       "Still thinking about",
       {}},
      {"Qwen35XmlCallAfterReasoning",
       qwen35,
       "Need the "
       "weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
       "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       "",
       "Need the weather.",
       {call(0, "get_weather", R"({"city":"Paris","days":3})")}},
      {"ToolCallInsideOpenThinkEndsReasoning",
       qwen35,
       "I should look it up.\n<tool_call>\n<function=search>\n<parameter=query>\nflights to Oslo\n"
       "</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>",
       "",
       "I should look it up.",
       {call(0, "search", R"({"query":"flights to Oslo","limit":5})")}},
      {"Qwen35XmlTwoCallsAndContent",
       config(ToolCallFormat::kQwen3Xml),
       "Checking "
       "both.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
       "</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\nRome "
       "events\n</parameter>\n</function>\n</tool_call>",
       "Checking both.",
       "",
       {call(0, "get_weather", R"({"city":"Rome"})"),
        call(1, "search", R"({"query":"Rome events"})")}},
      {"HermesJsonCall",
       hermes,
       "I'll check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
       "\"unit\": \"c\"}}\n</tool_call>",
       "I'll check.",
       "",
       {call(0, "get_weather", R"({"city":"Paris","unit":"c"})")}},
      {"HermesTwoCallsThenText",
       hermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Oslo\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"snow\\\"}\"}\n"
       "</tool_call>\nDone.",
       "Done.",
       "",
       {call(0, "get_weather", R"({"city":"Oslo"})"), call(1, "search", R"({"query":"snow"})")}},
      {"HermesCallAfterThinking",
       hermes,
       "<think>\nUser wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": {\"city\": \"Lima\"}}\n</tool_call>",
       "",
       "User wants weather.",
       {call(0, "get_weather", R"({"city":"Lima"})")}},
      {"HermesUnicodeArguments",
       hermes,
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"caf\u00e9 "
       "\u2615\"}}\n</tool_call>",
       "",
       "",
       {call(0, "search", "{\"query\":\"caf\u00e9 \u2615\"}")}},
      {"HermesUnterminatedButCompleteAtEnd",
       hermes,
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}",
       "",
       "",
       {call(0, "search", R"({"query":"x"})")}},
      {"HermesMalformedFallsBackToContent",
       hermes,
       "Sure.\n<tool_call>\n{not json}\n</tool_call>",
       "Sure.\n<tool_call>\n{not json}\n</tool_call>",
       "",
       {}},
      {"HermesCutOffFallsBackToContent",
       hermes,
       "<tool_call>\n{\"name\": \"search\", \"argu",
       "<tool_call>\n{\"name\": \"search\", \"argu",
       "",
       {}},
      {"HermesCallWithoutNameFallsBack",
       hermes,
       "<tool_call>{\"arguments\": {}}</tool_call>",
       "<tool_call>{\"arguments\": {}}</tool_call>",
       "",
       {}},
      {"PartialTagAtEndIsContent", hermes, "Hello <tool_", "Hello <tool_", "", {}},
      {"Llama3BareJson",
       llama,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
       "",
       "",
       {call(0, "get_weather", R"({"city":"Paris"})")}},
      {"Llama3TypedJsonWithLeadingSpace",
       llama,
       "\n {\"type\": \"function\", \"name\": \"search\", \"parameters\": {\"query\": \"x\"}}",
       "",
       "",
       {call(0, "search", R"({"query":"x"})")}},
      {"Llama3PythonTagTwoCalls",
       llama,
       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"a\"}}; {\"name\": "
       "\"search\", \"parameters\": {\"query\": \"b\"}}",
       "",
       "",
       {call(0, "search", R"({"query":"a"})"), call(1, "search", R"({"query":"b"})")}},
      {"Llama3JsonThatIsNoCallIsContent", llama, "{\"answer\": 42}", "{\"answer\": 42}", "", {}},
      {"Llama3ProseIsContent",
       llama,
       "The weather is {\"name\": \"x\"} fine.",
       "The weather is {\"name\": \"x\"} fine.",
       "",
       {}},
      {"Llama3PythonCodeFallsBack",
       llama,
       "<|python_tag|>print(1)",
       "<|python_tag|>print(1)",
       "",
       {}},
      {"MistralJsonList",
       mistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
       "\"search\", \"arguments\": {\"query\": \"x\"}}]",
       "",
       "",
       {call(0, "get_weather", R"({"city":"Paris"})"), call(1, "search", R"({"query":"x"})")}},
      {"MistralNameArgsForm",
       mistral,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS]{\"query\": "
       "\"x\"}",
       "",
       "",
       {call(0, "get_weather", R"({"city":"Paris"})"), call(1, "search", R"({"query":"x"})")}},
      {"MistralCallIdForm",
       mistral,
       "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\":\"Oslo\"}",
       "",
       "",
       {call(0, "get_weather", R"({"city":"Oslo"})")}},
      {"MistralContentBeforeCall",
       mistral,
       "Let me check.[TOOL_CALLS]search[ARGS]{\"query\": \"q\"}",
       "Let me check.",
       "",
       {call(0, "search", R"({"query":"q"})")}},
      {"MistralProseAfterTagFallsBack",
       mistral,
       "[TOOL_CALLS] sure thing",
       "[TOOL_CALLS] sure thing",
       "",
       {}},
      {"MagistralThinkTags",
       magistral,
       "[THINK]Let me see.[/THINK]The answer.",
       "The answer.",
       "Let me see.",
       {}},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

void expect_message(const ParsedMessage& got, const Case& c, const std::string& how) {
  EXPECT_EQ(got.content, c.content) << c.name << " " << how;
  EXPECT_EQ(got.reasoning_content, c.reasoning) << c.name << " " << how;
  EXPECT_EQ(got.tool_calls, c.calls) << c.name << " " << how;
}

// Feeds `text` cut at `cuts` (ascending offsets) and gathers the deltas.
ParsedMessage stream(const ParserConfig& cfg, const std::string& text,
                     const std::vector<size_t>& cuts) {
  OutputParser parser(cfg);
  ParsedMessage out;
  auto take = [&](const ParsedDelta& d) {
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    out.tool_calls.insert(out.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  size_t from = 0;
  for (size_t cut : cuts) {
    take(parser.push(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  take(parser.push(std::string_view(text).substr(from)));
  take(parser.finish());
  return out;
}

class ParserCase : public ::testing::TestWithParam<Case> {};

TEST_P(ParserCase, OneShotMatchesTheFormat) {
  const Case& c = GetParam();
  expect_message(OutputParser::parse(c.config, c.text), c, "one shot");
}

TEST_P(ParserCase, OneBytePiecesGiveTheSameDeltas) {
  const Case& c = GetParam();
  std::vector<size_t> cuts;
  for (size_t i = 1; i < c.text.size(); ++i) cuts.push_back(i);
  expect_message(stream(c.config, c.text, cuts), c, "in 1-byte pieces");
}

TEST_P(ParserCase, EveryTwoPieceSplitGivesTheSameDeltas) {
  const Case& c = GetParam();
  for (size_t i = 0; i <= c.text.size(); ++i) {
    expect_message(stream(c.config, c.text, {i}), c, "split at " + std::to_string(i));
  }
}

TEST_P(ParserCase, RandomSplitsGiveTheSameDeltas) {
  const Case& c = GetParam();
  std::mt19937 rng(1234);
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < c.text.size(); ++i) {
      if (rng() % 4 == 0) cuts.push_back(i);
    }
    expect_message(stream(c.config, c.text, cuts), c, "random round " + std::to_string(round));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ParserCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(OutputParser, StreamsContentWithoutWaitingForTheEnd) {
  OutputParser parser(config(ToolCallFormat::kHermes));
  EXPECT_EQ(parser.push("Hello").content, "Hello");
  EXPECT_EQ(parser.push(" world").content, " world");
  // A possible tag start is held back (with the space before it, which a tag would drop), and
  // released once it cannot be a tag.
  EXPECT_EQ(parser.push(" <tool").content, "");
  EXPECT_EQ(parser.push("kit> ok").content, " <toolkit> ok");
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_EQ(parser.result().content, "Hello world <toolkit> ok");
}

TEST(OutputParser, ReasoningStreamsBeforeTheCloseTag) {
  OutputParser parser(config(ToolCallFormat::kQwen3Xml, /*starts_in_reasoning=*/true));
  EXPECT_EQ(parser.push("\nFirst").reasoning_content, "First");
  EXPECT_EQ(parser.push(" step").reasoning_content, " step");
  const ParsedDelta d = parser.push("\n</think>\n\nAnswer");
  EXPECT_EQ(d.reasoning_content, "");
  EXPECT_EQ(d.content, "Answer");
}

TEST(OutputParser, EmitsEachToolCallOnceItsCloseTagArrives) {
  OutputParser parser(config(ToolCallFormat::kHermes));
  EXPECT_TRUE(parser.push("<tool_call>\n{\"name\": \"search\", ").empty());
  EXPECT_TRUE(parser.push("\"arguments\": {\"query\": \"x\"}}\n").empty());
  const ParsedDelta d = parser.push("</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "search");
  EXPECT_TRUE(parser.result().has_tool_calls());
}

TEST(OutputParser, DefaultCallIdsAreRandomAndOpenAiShaped) {
  ParserConfig cfg;
  cfg.tool_format = ToolCallFormat::kHermes;
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {}}</tool_call>";
  const ParsedMessage one = OutputParser::parse(cfg, text);
  const ParsedMessage two = OutputParser::parse(cfg, text);
  ASSERT_EQ(one.tool_calls.size(), 2u);
  for (const ToolCall& c : one.tool_calls) {
    EXPECT_EQ(c.id.size(), 29u) << c.id;
    EXPECT_EQ(c.id.substr(0, 5), "call_");
  }
  EXPECT_NE(one.tool_calls[0].id, one.tool_calls[1].id);
  EXPECT_NE(one.tool_calls[0].id, two.tool_calls[0].id);
  EXPECT_EQ(one.tool_calls[1].index, 1);
}

TEST(OutputParser, QwenXmlValuesAreCoercedByTheToolSchema) {
  ParserConfig cfg = config(ToolCallFormat::kQwen3Xml);
  cfg.tools = OrderedJson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {
      "n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
      "obj": {"type": "object"}, "list": {"type": "array"}, "code": {"type": "string"},
      "maybe": {"type": ["integer", "null"]}, "either": {"anyOf": [{"type": "number"}, {"type": "string"}]},
      "bad_int": {"type": "integer"}, "whole": {"type": "integer"}}}}}])");
  const std::string text =
      "<tool_call>\n<function=f>\n"
      "<parameter=n>\n42\n</parameter>\n<parameter=x>\n-2.5e3\n</parameter>\n"
      "<parameter=ok>\nTrue\n</parameter>\n<parameter=obj>\n{\"a\": [1, 2]}\n</parameter>\n"
      "<parameter=list>\n[\"x\", 3]\n</parameter>\n<parameter=code>\n007\n</parameter>\n"
      "<parameter=maybe>\nnull\n</parameter>\n<parameter=either>\nabc\n</parameter>\n"
      "<parameter=bad_int>\nmany\n</parameter>\n<parameter=whole>\n3.0\n</parameter>\n"
      "<parameter=unknown>\n\nkeep\nlines\n\n</parameter>\n"
      "</function>\n</tool_call>";
  const ParsedMessage m = OutputParser::parse(cfg, text);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(OrderedJson::parse(m.tool_calls[0].arguments),
            OrderedJson::parse(R"({"n": 42, "x": -2500.0, "ok": true, "obj": {"a": [1, 2]},
              "list": ["x", 3], "code": "007", "maybe": null, "either": "abc", "bad_int": "many",
              "whole": 3, "unknown": "\nkeep\nlines\n"})"));
  // Argument order is the model's order.
  EXPECT_EQ(m.tool_calls[0].arguments.substr(0, 12), "{\"n\":42,\"x\":");
}

TEST(OutputParser, QwenXmlWithoutSchemaKeepsStrings) {
  ParserConfig cfg = config(ToolCallFormat::kQwen3Xml);
  cfg.tools = nullptr;
  const ParsedMessage m = OutputParser::parse(
      cfg, "<tool_call>\n<function=g>\n<parameter=n>\n42\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"n":"42"})");
}

TEST(OutputParser, WithoutToolFormatTagsAreContent) {
  const std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>";
  const ParsedMessage m = OutputParser::parse(config(ToolCallFormat::kNone), text);
  EXPECT_EQ(m.content, text);
  EXPECT_FALSE(m.has_tool_calls());
}

TEST(OutputParser, ReasoningParsingCanBeOff) {
  ParserConfig cfg = config(ToolCallFormat::kNone);
  cfg.parse_reasoning = false;
  EXPECT_EQ(OutputParser::parse(cfg, "<think>x</think>y").content, "<think>x</think>y");
}

TEST(OutputParser, InvalidUtf8AndGarbageNeverThrow) {
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kQwen3Xml,
                           ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
    const std::string text =
        "\xff\xfe<tool_call><function=\xc3><parameter=\xff>\x80</parameter>"
        "</tool_call>[TOOL_CALLS]\xe2[ARGS]{\"\xff\": 1}<|python_tag|>{\"name\": \"\xc0\"}";
    EXPECT_NO_THROW(OutputParser::parse(config(f), text)) << tool_call_format_name(f);
  }
  // A call whose name holds invalid UTF-8 still yields valid JSON arguments text.
  const ParsedMessage m = OutputParser::parse(
      config(ToolCallFormat::kQwen3Xml),
      "<tool_call><function=f><parameter=a>\xff\xfe</parameter></function></tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_TRUE(OrderedJson::accept(m.tool_calls[0].arguments)) << m.tool_calls[0].arguments;
}

// Random texts made of tag fragments: whatever the split, the result is the one-shot result.
TEST(OutputParser, RandomTagSoupIsSplitInvariant) {
  const std::vector<std::string> fragments = {
      "<think>",
      "</think>",
      "<tool_call>",
      "</tool_call>",
      "<function=get_weather>",
      "<parameter=city>",
      "</parameter>",
      "</function>",
      "{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}",
      "[TOOL_CALLS]",
      "[ARGS]",
      "[CALL_ID]",
      "get_weather",
      "{",
      "}",
      "[",
      "]",
      "\"",
      "\\",
      "\n",
      " ",
      "text",
      "<",
      "<|python_tag|>",
      ";",
      "[THINK]",
      "[/THINK]",
      "{\"name\""};
  std::mt19937 rng(99);
  for (ToolCallFormat f :
       {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kQwen3Xml,
        ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
    for (int round = 0; round < 300; ++round) {
      std::string text;
      const int n = static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) text += fragments[rng() % fragments.size()];
      ParserConfig cfg = config(f, rng() % 2 == 0);
      if (rng() % 3 == 0) cfg.reasoning_tags = {"[THINK]", "[/THINK]"};
      const ParsedMessage whole = OutputParser::parse(cfg, text);
      std::vector<size_t> bytes;
      for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
      const ParsedMessage pieces = stream(cfg, text, bytes);
      ASSERT_EQ(pieces.content, whole.content) << text;
      ASSERT_EQ(pieces.reasoning_content, whole.reasoning_content) << text;
      ASSERT_EQ(pieces.tool_calls, whole.tool_calls) << text;
    }
  }
}

TEST(ToolCallFormat, DetectedFromTemplateText) {
  EXPECT_EQ(detect_tool_call_format("<tool_call>\n<function=name>"), ToolCallFormat::kQwen3Xml);
  EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n' }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("[TOOL_CALLS]"), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("<|start_header_id|>ipython<|end_header_id|>"),
            ToolCallFormat::kLlama3);
  EXPECT_EQ(detect_tool_call_format("<|im_start|>{{ role }}"), ToolCallFormat::kNone);
  EXPECT_EQ(detect_reasoning_tags("[THINK]").close, "[/THINK]");
  EXPECT_EQ(detect_reasoning_tags("<think>").open, "<think>");
}

TEST(ToolCallFormat, TagsAndTheLlama3BareCallTest) {
  EXPECT_EQ(tool_call_tag(ToolCallFormat::kHermes), "<tool_call>");
  EXPECT_EQ(tool_call_tag(ToolCallFormat::kQwen3Xml), "<tool_call>");
  EXPECT_EQ(tool_call_tag(ToolCallFormat::kLlama3), "<|python_tag|>");
  EXPECT_EQ(tool_call_tag(ToolCallFormat::kMistral), "[TOOL_CALLS]");
  EXPECT_EQ(tool_call_tag(ToolCallFormat::kNone), "");
  // Decided where the parser decides: at the quote that closes "name".
  for (const char* undecided : {"{", "{ \n", "{\"na", "{\"name", "{\"type\": \"function\", "})
    EXPECT_EQ(opens_llama3_call(undecided), std::nullopt) << undecided;
  for (const char* call : {"{\"name\"", "{ \"name\":", "{\"type\":\"function\",\"name\""})
    EXPECT_EQ(opens_llama3_call(call), true) << call;
  for (const char* text : {"Sure", "{\"answer\"", "{\"na \"", "[{\"name\""})
    EXPECT_EQ(opens_llama3_call(text), false) << text;
  // Each of these reads the same as a call's start in the parser: the text is a call or not.
  for (const auto& [text, is_call] : {std::pair{"{\"name\": \"search\", \"parameters\": {}}", true},
                                      {"{\"answer\": 42}", false}}) {
    const ParsedMessage m = OutputParser::parse(config(ToolCallFormat::kLlama3), text);
    EXPECT_EQ(m.tool_calls.size(), is_call ? 1u : 0u) << text;
  }
}

// A forced opening, finished as a model would, parses as a call to the named function; for
// "required" (no name) the model writes the name too.
TEST(ToolCallOpening, CompletedByTheModelParsesAsTheCall) {
  struct Opening {
    ToolCallFormat format;
    bool mistral_args;
    std::string named, named_rest, any, any_rest;
  };
  const std::vector<Opening> openings = {
      {ToolCallFormat::kHermes, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
       "{\"city\": \"Paris\"}}\n</tool_call>", "<tool_call>\n{\"name\": \"",
       "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {ToolCallFormat::kQwen3Xml, false, "<tool_call>\n<function=get_weather>\n",
       "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
       "<tool_call>\n<function=",
       "get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallFormat::kLlama3, false,
       "{\"name\": \"get_weather\", \"parameters\": ", "{\"city\": \"Paris\"}}", "{\"name\": \"",
       "get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
      {ToolCallFormat::kMistral, false,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Paris\"}}]",
       "[TOOL_CALLS]", "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"},
      {ToolCallFormat::kMistral, true, "[TOOL_CALLS]get_weather[ARGS]", "{\"city\": \"Paris\"}",
       "[TOOL_CALLS]", "get_weather[ARGS]{\"city\": \"Paris\"}"},
  };
  for (const Opening& o : openings) {
    const char* name = tool_call_format_name(o.format);
    EXPECT_EQ(tool_call_opening(o.format, "get_weather", o.mistral_args), o.named) << name;
    EXPECT_EQ(tool_call_opening(o.format, "", o.mistral_args), o.any) << name;
    for (const std::string& text : {o.named + o.named_rest, o.any + o.any_rest}) {
      const ParsedMessage m = OutputParser::parse(config(o.format), text);
      ASSERT_EQ(m.tool_calls.size(), 1u) << name << ": " << text;
      EXPECT_EQ(m.tool_calls[0].name, "get_weather") << name;
      EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Paris"})") << name;
      EXPECT_EQ(m.content, "") << name;
    }
  }
  EXPECT_EQ(tool_call_opening(ToolCallFormat::kNone, "get_weather", false), "");
  // A name is written as a JSON string where the format is JSON.
  EXPECT_EQ(tool_call_opening(ToolCallFormat::kLlama3, "a\"b", false),
            "{\"name\": \"a\\\"b\", \"parameters\": ");
}

// max_tool_calls keeps the first calls of a message and drops the rest, streamed or not.
TEST(OutputParser, MaxToolCallsDropsLaterCalls) {
  ParserConfig cfg = config(ToolCallFormat::kMistral);
  cfg.max_tool_calls = 1;
  const std::string text =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
      "\"search\", \"arguments\": {\"query\": \"x\"}}]";
  const std::vector<ToolCall> first = {call(0, "get_weather", R"({"city":"Paris"})")};
  EXPECT_EQ(OutputParser::parse(cfg, text).tool_calls, first);
  std::vector<size_t> bytes;  // every byte a piece
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  EXPECT_EQ(stream(cfg, text, bytes).tool_calls, first);
}

}  // namespace
}  // namespace strata::text::chat
