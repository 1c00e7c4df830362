// Structured output end to end on the built-in model (models/strata-demo, on the CPU): the mask in
// the sampling step leaves greedy output alone where it already fits, 1,000 sampled answers over 50
// schemas × 20 prompts all parse and validate (against an independent validator written here,
// not the grammar), and every tool call over the demo prompts names a declared tool with valid
// arguments.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "control/output_constraint.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "test_util.h"
#include "text/chat/chat_template.h"
#include "text/chat/output_parser.h"
#include "text/structured/json_schema.h"
#include "text/structured/regex_grammar.h"
#include "text/structured/tool_call_grammar.h"
#include "text/tokenizer.h"

namespace strata::control {
namespace {

using OJ = nlohmann::ordered_json;
namespace st = text::structured;

const std::string kDemo = std::string(STRATA_TEST_FIXTURES) + "/../../models/strata-demo";

struct Demo {
  std::unique_ptr<text::Tokenizer> tokenizer = text::Tokenizer::load(kDemo);
  text::chat::ChatTemplate chat = text::chat::ChatTemplate::load(kDemo);
  std::shared_ptr<const st::Vocabulary> vocab = st::Vocabulary::from_tokenizer(*tokenizer);
};
Demo& demo() {
  static Demo d;
  return d;
}

runtime::Engine make_engine(int64_t parallel) {
  runtime::EngineOptions o;
  o.context_size = 1024;
  o.parallel = parallel;
  return runtime::Engine(model::load_model(kDemo), o);
}

std::vector<int32_t> prompt(const std::string& user, bool thinking, const OJ& tools = nullptr) {
  text::chat::ChatRequest r;
  r.messages = OJ::array({{{"role", "user"}, {"content", user}}});
  r.tools = tools;
  if (!thinking) r.kwargs["enable_thinking"] = false;
  return demo().tokenizer->encode(demo().chat.render(r).text);
}

// ---- An independent JSON Schema validator (the subset the schemas below use). ----
bool valid(const OJ& v, const OJ& s, const OJ& root);

bool valid_string_format(const std::string& x, const std::string& format) {
  static const std::map<std::string, std::regex> formats = {
      {"date", std::regex(R"(^\d{4}-\d{2}-\d{2}$)")},
      {"date-time", std::regex(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)")},
      {"email", std::regex(R"(^[^@\s]+@[^@\s]+\.[A-Za-z]+$)")},
      {"uuid", std::regex(R"(^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$)")}};
  return std::regex_search(x, formats.at(format));
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool valid(const OJ& v, const OJ& s, const OJ& root) {
  if (s.contains("$ref"))
    return valid(v, root.at(OJ::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (s.contains("const")) return v == s["const"];
  if (s.contains("anyOf")) {
    for (const OJ& b : s["anyOf"])
      if (valid(v, b, root)) return true;
    return false;
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const OJ& b : s["oneOf"]) n += valid(v, b, root);
    return n == 1;
  }
  const std::string t = s.value("type", "");
  if (t == "object") {
    if (!v.is_object()) return false;
    for (const OJ& r : s.value("required", OJ::array()))
      if (!v.contains(r.get<std::string>())) return false;
    const OJ props = s.value("properties", OJ::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!valid(x, props[k], root)) return false;
      } else if (s.value("additionalProperties", true) == false) {
        return false;
      }
    }
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return false;
    if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", size_t{1000000}))
      return false;
    for (const OJ& x : v)
      if (s.contains("items") && !valid(x, s["items"], root)) return false;
    return true;
  }
  if (t == "string") {
    if (!v.is_string()) return false;
    const std::string x = v.get<std::string>();
    if (code_points(x) < s.value("minLength", size_t{0}) ||
        code_points(x) > s.value("maxLength", size_t{1000000}))
      return false;
    if (s.contains("pattern") && !std::regex_search(x, std::regex(s["pattern"].get<std::string>())))
      return false;
    return !s.contains("format") || valid_string_format(x, s["format"]);
  }
  if (t == "integer" || t == "number") {
    if (!v.is_number() || (t == "integer" && !v.is_number_integer())) return false;
    const double x = v.get<double>();
    return x >= s.value("minimum", -1e300) && x <= s.value("maximum", 1e300);
  }
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return true;
}

// ---- 50 schemas with bounded output: each built from a seed over a set of property kinds. ----
OJ property_kind(int k) {
  switch (k % 12) {
    case 0: return {{"type", "string"}, {"maxLength", 10}};
    case 1: return {{"type", "integer"}, {"minimum", 0}, {"maximum", 500}};
    case 2: return {{"enum", {"red", "green", "blue"}}};
    case 3: return {{"type", "boolean"}};
    case 4: return {{"type", "array"}, {"items", {{"type", "integer"}, {"minimum", -9}, {"maximum", 9}}},
                    {"minItems", 1}, {"maxItems", 3}};
    case 5: return {{"type", "object"},
                    {"properties", {{"x", {{"type", "number"}, {"minimum", 0}, {"maximum", 10}}},
                                    {"y", {{"type", "string"}, {"maxLength", 6}}}}},
                    {"required", {"x", "y"}}, {"additionalProperties", false}};
    case 6: return {{"anyOf", {{{"type", "integer"}, {"minimum", 1}, {"maximum", 99}},
                               {{"type", "string"}, {"maxLength", 5}}, {{"type", "null"}}}}};
    case 7: return {{"$ref", "#/$defs/point"}};
    case 8: return {{"type", "string"}, {"format", "date"}};
    case 9: return {{"type", "string"}, {"pattern", "^[A-Z]{2}[0-9]{2,3}$"}};
    case 10: return {{"type", "array"}, {"items", {{"enum", {"a", "b", 1, true}}}}, {"maxItems", 2}};
    default: return {{"type", "object"},
                     {"properties", {{"tags", {{"type", "array"}, {"items", {{"type", "string"},
                                      {"maxLength", 4}}}, {"minItems", 0}, {"maxItems", 2}}},
                                     {"level", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3}}}}},
                     {"required", {"level"}}};
  }
}

OJ schema(int i) {
  OJ props = OJ::object();
  OJ required = OJ::array();
  const int n = 2 + i % 3;
  for (int j = 0; j < n; ++j) {
    const std::string name = "f" + std::to_string(j) + "_" + std::to_string((i * 7 + j * 5) % 12);
    props[name] = property_kind(i * 7 + j * 5);
    if ((i + j) % 3 != 2) required.push_back(name);
  }
  OJ s = {{"type", "object"}, {"properties", props}, {"required", required},
          {"additionalProperties", false},
          {"$defs", {{"point", {{"type", "object"},
                                {"properties", {{"lat", {{"type", "integer"}, {"minimum", -90}, {"maximum", 90}}},
                                                {"lon", {{"type", "integer"}, {"minimum", -180}, {"maximum", 180}}}}},
                                {"required", {"lat", "lon"}}}}}}};
  if (i % 10 == 9) s = {{"type", "array"}, {"items", s}, {"minItems", 1}, {"maxItems", 2}, {"$defs", s["$defs"]}};
  return s;
}

const std::vector<std::string> kPrompts = {
    "Describe a person as JSON.", "Give me a record for a city.", "What is the weather today?",
    "List three colors.", "Tell me about the ocean.", "Make up a product.", "Who are you?",
    "Write a short poem.", "What is 27 + 45?", "Describe a cat.", "Plan a trip to Rome.",
    "What does \"harbor\" mean?", "Give me a fortune.", "Summarize a book.", "Name a planet.",
    "Create a user profile.", "Invent a recipe.", "Describe your day.", "Pick a number.",
    "Explain gravity briefly."};

class Job : public runtime::Work {
 public:
  Job(runtime::GenerationRequest r, std::unique_ptr<OutputConstraint> c) : c_(std::move(c)) {
    request = std::move(r);
    request.constraint = c_.get();
  }
  bool on_token(int32_t id) override {
    tokens.push_back(id);
    return true;
  }
  void on_finish(const runtime::GenerationResult& r) override { reason = r.finish_reason; }
  void on_error(const std::string& m) override { error = m; }
  std::vector<int32_t> tokens;
  runtime::FinishReason reason = runtime::FinishReason::kCancelled;
  std::string error;
  std::unique_ptr<OutputConstraint> c_;
};

std::unique_ptr<OutputConstraint> answer_constraint(std::shared_ptr<st::TokenConstraint> c,
                                                    int32_t end) {
  ConstraintSettings s;
  s.answer = std::move(c);
  s.end_ids = {end};
  return std::make_unique<OutputConstraint>(std::move(s));
}

TEST(StructuredOutput, GreedyOutputThatAlreadyFitsIsUnchanged) {
  runtime::Engine engine = make_engine(1);
  const int32_t end = *demo().tokenizer->token_id("<|im_end|>");
  runtime::GenerationRequest r;
  r.prompt = prompt("Tell me a quote about science.", false);
  r.max_tokens = 48;
  r.sampling.temperature = 0;
  r.stop_ids = {end};
  const runtime::GenerationResult free = engine.generate(r);
  const std::string text = demo().tokenizer->decode(free.tokens);
  ASSERT_FALSE(text.empty());
  // The exact text (every regex metacharacter escaped), and a loose pattern: both fit it.
  std::string literal;
  for (unsigned char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(static_cast<char>(c)) != std::string_view::npos)
      literal.push_back('\\');
    if (c == '\n') literal += "\\n";
    else literal.push_back(static_cast<char>(c));
  }
  if (free.finish_reason == runtime::FinishReason::kLength) literal += "(.|\\n)*";
  for (const std::string& pattern : {literal, std::string("(.|\\n)*")}) {
    st::Grammar g;
    g.set_root(st::compile_regex(g, pattern, st::RegexMode::kRaw));
    auto c = answer_constraint(std::make_shared<st::TokenConstraint>(g, demo().vocab), end);
    r.constraint = c.get();
    const runtime::GenerationResult constrained = engine.generate(r);
    EXPECT_EQ(constrained.tokens, free.tokens) << pattern;
  }
  // And the mask bites: a pattern the free text does not fit changes the output to fit it.
  st::Grammar g;
  g.set_root(st::compile_regex(g, "(yes|no)", st::RegexMode::kRaw));
  auto c = answer_constraint(std::make_shared<st::TokenConstraint>(g, demo().vocab), end);
  r.constraint = c.get();
  const std::string answer = demo().tokenizer->decode(engine.generate(r).tokens);
  EXPECT_TRUE(answer == "yes" || answer == "no") << answer;
}

TEST(StructuredOutput, ThousandSampledAnswersOverFiftySchemasAllValidate) {
  const auto t0 = std::chrono::steady_clock::now();
  // All answers in one engine, 50 at a time: wide decode steps read the weights once for many
  // tokens (the constraint is per sequence either way).
  runtime::Engine engine = make_engine(50);
  const int32_t end = *demo().tokenizer->token_id("<|im_end|>");
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& p : kPrompts) prompts.push_back(prompt(p, false));
  int valid_count = 0, total = 0;
  const int schemas = std::getenv("STRATA_STRUCTURED_SCHEMAS") ? std::atoi(std::getenv("STRATA_STRUCTURED_SCHEMAS")) : 50;
  size_t tokens = 0;
  std::vector<OJ> job_schemas;
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < schemas; ++i) {
    const OJ s = schema(i);
    auto compiled = std::make_shared<st::TokenConstraint>(st::compile_json_schema(s), demo().vocab);
    for (size_t p = 0; p < prompts.size(); ++p) {
      runtime::GenerationRequest r;
      r.prompt = prompts[p];
      r.max_tokens = 400;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(i * 100 + static_cast<int>(p));
      r.stop_ids = {end};
      jobs.push_back(std::make_shared<Job>(std::move(r), answer_constraint(compiled, end)));
      job_schemas.push_back(s);
      engine.add(jobs.back());
    }
  }
  while (!engine.idle()) engine.step();
  for (size_t j = 0; j < jobs.size(); ++j) {
    const auto& job = jobs[j];
    const OJ& s = job_schemas[j];
    ++total;
    tokens += job->tokens.size();
    const std::string text = demo().tokenizer->decode(job->tokens);
    EXPECT_TRUE(job->error.empty()) << job->error;
    EXPECT_EQ(job->reason, runtime::FinishReason::kStop) << "schema " << j / prompts.size() << ": " << text;
    if (std::getenv("STRATA_STRUCTURED_SHOW")) std::printf("%zu tokens: %s\n", job->tokens.size(), text.c_str());
    const OJ v = OJ::parse(text, nullptr, false);
    if (v.is_discarded() || !valid(v, s, s)) {
      ADD_FAILURE() << "schema " << j / prompts.size() << " " << s.dump() << "\nanswer: " << text;
      continue;
    }
    ++valid_count;
  }
  EXPECT_EQ(total, 1000);
  EXPECT_EQ(valid_count, 1000);
  std::printf("%d constrained answers, %zu tokens, in %.1f s\n", total, tokens,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST(StructuredOutput, EveryToolCallOverTheDemoPromptsNamesADeclaredToolWithValidArguments) {
  runtime::Engine engine = make_engine(8);
  const int32_t end = *demo().tokenizer->token_id("<|im_end|>");
  const auto goldens = nlohmann::json::parse(
      std::ifstream(test::test_fixture("demo/strata-demo.json")));
  int calls = 0, checked = 0;
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<OJ> job_tools;
  for (const auto& c : goldens["cases"]) {
    if (c["tools"].is_null()) continue;
    const OJ tools = OJ::parse(c["tools"].dump());
    ConstraintSettings base;
    base.tool_call = std::make_shared<st::TokenConstraint>(
        st::tool_call_grammar(tools, st::ToolCallSyntax::kQwenXml), demo().vocab);
    base.call_open_id = demo().tokenizer->token_id("<tool_call>").value_or(-1);
    base.end_ids = {end};
    base.think_close = demo().tokenizer->token_id("</think>").value_or(-1);
    text::chat::ChatRequest chat;
    chat.messages = OJ::parse(c["messages"].dump());
    chat.tools = tools;
    chat.kwargs = OJ::parse(c["kwargs"].dump());
    const text::chat::RenderedPrompt rendered = demo().chat.render(chat);
    base.starts_in_reasoning = rendered.starts_in_reasoning;
    for (int seed = 0; seed < 10; ++seed) {
      runtime::GenerationRequest r;
      r.prompt = demo().tokenizer->encode(rendered.text);
      r.max_tokens = 400;
      r.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
      r.sampling.seed = static_cast<uint64_t>(seed);
      r.stop_ids = {end};
      jobs.push_back(std::make_shared<Job>(std::move(r), std::make_unique<OutputConstraint>(base)));
      job_tools.push_back(tools);
      engine.add(jobs.back());
    }
  }
  while (!engine.idle()) engine.step();
  for (size_t j = 0; j < jobs.size(); ++j) {
    text::chat::ParserConfig config;
    config.tool_format = text::chat::ToolCallFormat::kQwen3Xml;
    config.starts_in_reasoning = true;
    config.tools = job_tools[j];
    const std::string text = demo().tokenizer->decode(jobs[j]->tokens);
    const text::chat::ParsedMessage m = text::chat::OutputParser::parse(config, text);
    // A call begun must have been parsed: no <tool_call> left in the content.
    EXPECT_EQ(m.content.find("<tool_call>"), std::string::npos) << text;
    for (const auto& call : m.tool_calls) {
      ++calls;
      const OJ* params = nullptr;
      for (const OJ& t : job_tools[j])
        if (t["function"]["name"] == call.name) params = &t["function"]["parameters"];
      ASSERT_NE(params, nullptr) << "undeclared tool " << call.name << " in " << text;
      const OJ args = OJ::parse(call.arguments);
      EXPECT_TRUE(valid(args, *params, *params)) << call.arguments << " against " << params->dump();
      ++checked;
    }
  }
  EXPECT_GT(calls, 0);  // the demo model does call tools on these prompts
  EXPECT_EQ(checked, calls);
  std::printf("%d tool calls, all valid\n", calls);
}

}  // namespace
}  // namespace strata::control
