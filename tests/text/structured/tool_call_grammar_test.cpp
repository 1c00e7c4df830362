// The tool-call grammars, one per call syntax: texts each must accept and texts it must refuse
// (written from the syntaxes as the models' chat templates write calls, not from our output), and
// every accepted text read back by the output parser as exactly the call it spells.
#include "text/structured/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/chat/output_parser.h"
#include "text/structured/automaton.h"
#include "text/structured/json_schema.h"
#include "tool_call_tools.h"

namespace strata::text::structured {
namespace {

using OJ = nlohmann::ordered_json;
using chat::ToolCallFormat;

bool matches(const Grammar& g, std::string_view text) {
  Automaton a(g);
  const uint32_t s = a.walk(a.start(), text);
  return s != Automaton::kDead && a.accepts(s);
}

const OJ& kTools = test::weather_and_search_tools();

using Call = std::pair<std::string, std::string>;  // name, arguments as the parser writes them

struct Case {
  std::string text;
  std::vector<Call> calls;  // what the parser reads from the text after the syntax's opening
};

struct Syntax {
  ToolCallSyntax syntax;
  ToolCallFormat format;
  std::vector<std::string> openings;  // what may open a call; "" for Llama 3's bare JSON
};

// Each accepted text is parsed after each opening as exactly its calls, and nothing else.
void check(const Syntax& s, const std::vector<Case>& accept, const std::vector<std::string>& refuse,
           const ToolCallOptions& options = {}) {
  const Grammar g = tool_call_grammar(kTools, s.syntax, options);
  for (const Case& c : accept) {
    EXPECT_TRUE(matches(g, c.text)) << "should accept " << c.text;
    for (const std::string& opening : s.openings) {
      chat::ParserConfig config;
      config.tool_format = s.format;
      config.tools = kTools;
      const chat::ParsedMessage m = chat::OutputParser::parse(config, opening + c.text);
      EXPECT_EQ(m.content, "") << opening + c.text;
      std::vector<Call> calls;
      for (const chat::ToolCall& call : m.tool_calls) calls.emplace_back(call.name, call.arguments);
      EXPECT_EQ(calls, c.calls) << opening + c.text;
    }
  }
  for (const std::string& t : refuse) EXPECT_FALSE(matches(g, t)) << "should refuse " << t;
}

const Call kParis = {"get_weather", R"({"city":"Paris"})"};

TEST(ToolCallGrammar, HermesCallsNameADeclaredToolWithValidArguments) {
  check({ToolCallSyntax::kHermes, ToolCallFormat::kHermes, {"<tool_call>"}},
        {{"\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
          {kParis}},
         {R"({"name":"search","arguments":{"query":"cats"}}</tool_call>)",
          {{"search", R"({"query":"cats"})"}}}},
        {R"({"name": "get_time", "arguments": {}}</tool_call>)",
         R"({"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>)",
         R"({"name": "get_weather", "arguments": {"city": "Paris"}})",
         R"({"name": "get_weather", "parameters": {"city": "Paris"}}</tool_call>)"});
}

TEST(ToolCallGrammar, QwenXmlCallsWriteStringsRawAndTheRestAsJson) {
  check({ToolCallSyntax::kQwenXml, ToolCallFormat::kQwen3Xml, {"<tool_call>"}},
        {{"\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n"
          "</parameter>\n</function>\n</tool_call>",
          {{"get_weather", R"({"city":"Oslo","days":3})"}}}},
        {"\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
         "\n<function=search>\n<parameter=query>\nfar too "
         "long\n</parameter>\n</function>\n</tool_call>",
         "\n<function=get_time>\n</function>\n</tool_call>"});
}

// A parameter with no type is text the output parser keeps as it is (a string): an enum or const of
// strings is written raw, as the parser reads it back, not as JSON (whose quotes would stay in the
// value).
TEST(ToolCallGrammar, QwenXmlWritesUntypedStringEnumsRaw) {
  const OJ tools = OJ::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]},
      "unit": {"const": "c"}}}}}])");
  const Grammar xml = tool_call_grammar(tools, ToolCallSyntax::kQwenXml);
  const std::string end = "</function>\n</tool_call>";
  EXPECT_TRUE(matches(xml, "\n<function=f>\n<parameter=city>\nOslo\n</parameter>\n" + end));
  EXPECT_FALSE(matches(xml, "\n<function=f>\n<parameter=city>\n\"Oslo\"\n</parameter>\n" + end));
  EXPECT_TRUE(matches(xml, "\n<function=f>\n<parameter=unit>\nc\n</parameter>\n" + end));
}

// Llama 3: one JSON object, as the template teaches ("parameters") or as models also write it
// ("arguments", an opening "type": "function"); after <|python_tag|> or as the answer itself.
TEST(ToolCallGrammar, Llama3CallsAreOneJsonObject) {
  check({ToolCallSyntax::kLlama3, ToolCallFormat::kLlama3, {"", "<|python_tag|>", "\n "}},
        {{R"({"name": "get_weather", "parameters": {"city": "Paris"}})", {kParis}},
         {R"({"name": "get_weather", "arguments": {"city": "Oslo", "days": 7}})",
          {{"get_weather", R"({"city":"Oslo","days":7})"}}},
         {R"({"type": "function", "name": "search", "parameters": {"query": "cats"}})",
          {{"search", R"({"query":"cats"})"}}},
         {" {\n  \"name\":\"search\",\"parameters\":{\"query\":\"\"}\n}",
          {{"search", R"({"query":""})"}}},
         {"{\n        \"name\": \"get_weather\",\n        \"parameters\": {\n"
          "            \"city\": \"Paris\"\n        }\n}",
          {kParis}}},
        {R"({"name": "get_time", "parameters": {}})",
         R"({"name": "get_weather", "parameters": {"city": "Rome"}})",
         R"({"name": "get_weather", "parameters": {}})",
         R"({"name": "get_weather", "parameters": {"city": "Paris", "country": "FR"}})",
         R"({"name": "search", "parameters": {"query": "far too long"}})",
         R"({"name": "search", "parameters": "{\"query\": \"x\"}"})",
         R"({"parameters": {"city": "Paris"}, "name": "get_weather"})",
         R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])",
         R"({"name": "get_weather", "parameters": {"city": "Paris"}};)",
         R"({"name": "get_weather", "parameters": {"city": "Paris"}})"
         "\n"});
}

// Mistral 7B v0.3 and Nemo: a list of call objects after [TOOL_CALLS], each may carry the id the
// templates write; parallel_tool_calls false: a list of one.
TEST(ToolCallGrammar, MistralListCallsAreAJsonListOfCalls) {
  const Syntax list{ToolCallSyntax::kMistralList, ToolCallFormat::kMistral, {"[TOOL_CALLS]"}};
  const std::string two =
      R"([{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}, )"
      R"({"name": "search", "arguments": {"query": "x"}}])";
  check(list,
        {{R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])", {kParis}},
         {" [ {\"name\":\"search\",\"arguments\":{\"query\":\"x\"}} ]",
          {{"search", R"({"query":"x"})"}}},
         {two, {kParis, {"search", R"({"query":"x"})"}}}},
        {R"({"name": "get_weather", "arguments": {"city": "Paris"}})", "[]",
         R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])",
         R"([{"name": "get_time", "arguments": {}}])",
         R"([{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc"}])",
         R"([{"name": "get_weather", "arguments": {"city": "Paris"}},])"});
  ToolCallOptions one;
  one.single_call = true;
  check(list, {{R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])", {kParis}}}, {two},
        one);
}

// Mistral Small 3.2, Devstral, Ministral 3: NAME[ARGS]{...}, a [CALL_ID] before [ARGS] optional.
TEST(ToolCallGrammar, MistralArgsCallsAreANameThenArguments) {
  check({ToolCallSyntax::kMistralArgs, ToolCallFormat::kMistral, {"[TOOL_CALLS]"}},
        {{R"(get_weather[ARGS]{"city": "Paris"})", {kParis}},
         {R"(search[CALL_ID]a1B2c3D4e[ARGS]{"query": "x"})", {{"search", R"({"query":"x"})"}}},
         {R"(get_weather[ARGS] {"city":"Oslo","days":1})",
          {{"get_weather", R"({"city":"Oslo","days":1})"}}}},
        {R"(get_weather[ARGS]{"city": "Rome"})", R"(get_time[ARGS]{})",
         R"(get_weather{"city": "Paris"})", R"(search[CALL_ID]short[ARGS]{"query": "x"})",
         R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])",
         R"(get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]search[ARGS]{"query": "x"})"});
}

// The parser reads a name in the NAME[ARGS] form up to a character other than [A-Za-z0-9_.-], so
// a tool named otherwise cannot be called so: it is left out, and with no tool left the grammar
// is refused.
TEST(ToolCallGrammar, MistralArgsCallsLeaveOutNamesThatCannotBeWritten) {
  OJ tools = kTools;
  tools.push_back({{"type", "function"}, {"function", {{"name", "read file"}}}});
  const Grammar g = tool_call_grammar(tools, ToolCallSyntax::kMistralArgs);
  EXPECT_TRUE(matches(g, R"(get_weather[ARGS]{"city": "Paris"})"));
  EXPECT_FALSE(matches(g, R"(read file[ARGS]{})"));
  EXPECT_TRUE(matches(tool_call_grammar(tools, ToolCallSyntax::kMistralList),
                      R"([{"name": "read file", "arguments": {}}])"));
  const OJ unnamable = OJ::array({tools.back()});
  try {
    tool_call_grammar(unnamable, ToolCallSyntax::kMistralArgs);
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
}

// A tool whose parameters schema cannot be compiled (Claude Code's Workflow tool has a string of
// maxLength 524288, past the largest bound) still gets constrained calls: its name, and arguments
// left free, in every syntax; the other tools keep their schemas.
TEST(ToolCallGrammar, AToolWhoseSchemaCannotBeCompiledGetsFreeArguments) {
  const OJ tools = OJ::parse(R"([
      {"type": "function", "function": {"name": "workflow", "parameters": {"type": "object",
        "properties": {"script": {"type": "string", "maxLength": 524288}}, "required": ["script"]}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}])");
  EXPECT_THROW(compile_json_schema(tools[0]["function"]["parameters"]), Error);
  const Grammar hermes = tool_call_grammar(tools, ToolCallSyntax::kHermes);
  EXPECT_TRUE(
      matches(hermes, R"j({"name": "workflow", "arguments": {"script": "run()"}}</tool_call>)j"));
  EXPECT_TRUE(
      matches(hermes, R"j({"name": "workflow", "arguments": {"anything": [1, 2]}}</tool_call>)j"));
  EXPECT_FALSE(matches(hermes, R"j({"name": "workflow", "arguments": "run()"}</tool_call>)j"));
  EXPECT_TRUE(matches(hermes, R"j({"name": "add", "arguments": {"a": 1}}</tool_call>)j"));
  EXPECT_FALSE(matches(hermes, R"j({"name": "add", "arguments": {"a": "x"}}</tool_call>)j"));
  EXPECT_FALSE(matches(hermes, R"j({"name": "other", "arguments": {}}</tool_call>)j"));
  const Grammar xml = tool_call_grammar(tools, ToolCallSyntax::kQwenXml);
  EXPECT_TRUE(matches(xml,
                      "\n<function=workflow>\n<parameter=script>\nrun()\nline 2\n</parameter>\n"
                      "</function>\n</tool_call>"));
  EXPECT_TRUE(matches(xml, "\n<function=workflow>\n</function>\n</tool_call>"));
  EXPECT_TRUE(
      matches(xml, "\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(
      matches(xml, "\n<function=add>\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(matches(xml, "\n<function=other>\n</function>\n</tool_call>"));
  const Grammar llama = tool_call_grammar(tools, ToolCallSyntax::kLlama3);
  EXPECT_TRUE(matches(llama, R"j({"name": "workflow", "parameters": {"anything": [1, 2]}})j"));
  EXPECT_FALSE(matches(llama, R"j({"name": "add", "parameters": {"a": "x"}})j"));
  const Grammar list = tool_call_grammar(tools, ToolCallSyntax::kMistralList);
  EXPECT_TRUE(matches(list, R"j([{"name": "workflow", "arguments": {"x": null}}])j"));
  EXPECT_FALSE(matches(list, R"j([{"name": "add", "arguments": {"a": "x"}}])j"));
  const Grammar args = tool_call_grammar(tools, ToolCallSyntax::kMistralArgs);
  EXPECT_TRUE(matches(args, R"j(workflow[ARGS]{"script": "run()", "more": true})j"));
  EXPECT_FALSE(matches(args, R"j(workflow[ARGS]"run()")j"));
  EXPECT_FALSE(matches(args, R"j(add[ARGS]{"a": "x"})j"));
}

TEST(ToolCallGrammar, OnlyMistralArgsCallsWriteSpecialTokens) {
  EXPECT_EQ(tool_call_special_tokens(ToolCallSyntax::kMistralArgs),
            (std::vector<std::string>{"[ARGS]", "[CALL_ID]"}));
  for (ToolCallSyntax s : {ToolCallSyntax::kHermes, ToolCallSyntax::kQwenXml,
                           ToolCallSyntax::kLlama3, ToolCallSyntax::kMistralList})
    EXPECT_TRUE(tool_call_special_tokens(s).empty());
}

}  // namespace
}  // namespace strata::text::structured
