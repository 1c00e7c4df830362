// Tool calls constrained in the token stream for every call format, on a small hand-made
// vocabulary: where each format's calls open (a tag's token or its text, Llama 3's bare JSON at
// the answer's start and after another call), what stays free, one call when parallel calls are
// off; and sampled calls (a random walk over each mask) that the output parser reads back as
// exactly the calls their text spells, each naming a declared tool with valid arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "control/output_constraint.h"
#include "text/chat/output_parser.h"
#include "text/structured/tool_call_grammar.h"
#include "tool_call_tools.h"

namespace strata::control {
namespace {

using OJ = nlohmann::ordered_json;
namespace st = text::structured;
using text::chat::ToolCallFormat;

const OJ& kTools = test::weather_and_search_tools();

// The vocabulary: every printable ASCII byte, newline and tab, some longer pieces, Mistral's
// [ARGS] and [CALL_ID] (writable special tokens), and three special tokens a constraint never
// writes (their vocabulary bytes are empty, as Vocabulary::from_tokenizer leaves them).
struct Vocab {
  std::vector<std::string> text;  // what each token decodes to
  int32_t python_tag = -1, tool_calls = -1, end = -1;
  std::shared_ptr<const st::Vocabulary> vocabulary;

  Vocab() {
    static const char* const kPieces[] = {"\n",
                                          "\t",
                                          "{\"",
                                          "{\"name\": \"",
                                          "name",
                                          "\":",
                                          " \"",
                                          "get_weather",
                                          "search",
                                          "\",",
                                          "\", \"parameters\": ",
                                          "arguments",
                                          "{\"city\": \"",
                                          "Paris",
                                          "Oslo",
                                          "\"}",
                                          "}}",
                                          "\"}}",
                                          "[{\"",
                                          "\"}]",
                                          "[ARGS]",
                                          "[CALL_ID]",
                                          "a1B2c3D4e",
                                          "query",
                                          "Sure",
                                          " thing"};
    for (int c = 0x20; c < 0x7F; ++c) text.emplace_back(1, static_cast<char>(c));
    for (const char* piece : kPieces) text.emplace_back(piece);
    python_tag = add("<|python_tag|>");
    tool_calls = add("[TOOL_CALLS]");
    end = add("</s>");
    std::vector<std::string> bytes = text;
    std::vector<bool> excluded(text.size(), false);
    for (int32_t id : {python_tag, tool_calls, end}) {
      bytes[id].clear();
      excluded[id] = true;
    }
    vocabulary = std::make_shared<const st::Vocabulary>(bytes, excluded);
  }
  int32_t add(const std::string& piece) {
    text.push_back(piece);
    return static_cast<int32_t>(text.size() - 1);
  }
  int32_t id(std::string_view piece) const {
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == piece) return static_cast<int32_t>(i);
    ADD_FAILURE() << "no token " << piece;
    return 0;
  }
};
const Vocab& vocab() {
  static const Vocab v;
  return v;
}

struct Format {
  ToolCallFormat format;
  st::ToolCallSyntax syntax;
};
constexpr Format kLlama3{ToolCallFormat::kLlama3, st::ToolCallSyntax::kLlama3};
constexpr Format kMistralList{ToolCallFormat::kMistral, st::ToolCallSyntax::kMistralList};
constexpr Format kMistralArgs{ToolCallFormat::kMistral, st::ToolCallSyntax::kMistralArgs};

// The settings the server makes for a format.
ConstraintSettings settings(Format f, bool single_call) {
  const Vocab& v = vocab();
  st::ToolCallOptions options;
  options.single_call = single_call;
  ConstraintSettings s;
  s.tool_call = std::make_shared<st::TokenConstraint>(
      st::tool_call_grammar(kTools, f.syntax, options), v.vocabulary);
  s.call_open = std::string(text::chat::tool_call_tag(f.format));
  s.call_open_id = f.format == ToolCallFormat::kLlama3 ? v.python_tag : v.tool_calls;
  s.single_call = single_call;
  s.end_ids = {v.end};
  if (f.format == ToolCallFormat::kLlama3) {
    s.bare_call = text::chat::opens_llama3_call;
    s.call_separators = text::chat::kLlama3CallSeparators;
  }
  return s;
}

// What the constraint allows next: nullopt when the pick is free.
std::optional<std::vector<int32_t>> allowed(OutputConstraint& c) {
  std::vector<uint32_t> words(vocab().vocabulary->words(), 0);
  if (!c.allowed(words)) return std::nullopt;
  std::vector<int32_t> ids;
  for (size_t id = 0; id < vocab().text.size(); ++id)
    if (words[id / 32] >> (id % 32) & 1) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

void emit(OutputConstraint& c, std::string_view piece) { c.on_emitted(vocab().id(piece)); }

bool only_end(const std::optional<std::vector<int32_t>>& ids) {
  return ids && *ids == std::vector<int32_t>{vocab().end};
}

TEST(ToolCallConstraint, Llama3BareJsonAtTheAnswersStartIsACallFromItsName) {
  OutputConstraint c(settings(kLlama3, false));
  emit(c, "\n");
  emit(c, "{\"");
  EXPECT_FALSE(allowed(c).has_value()) << "undecided: still free";
  emit(c, "name");
  EXPECT_FALSE(allowed(c).has_value());
  emit(c, "\":");  // {"name": the parser's test says a call
  const auto ids = allowed(c);
  ASSERT_TRUE(ids.has_value());
  EXPECT_NE(std::find(ids->begin(), ids->end(), vocab().id(" \"")), ids->end());
  emit(c, " \"");
  const auto names = allowed(c);
  ASSERT_TRUE(names.has_value());
  EXPECT_NE(std::find(names->begin(), names->end(), vocab().id("get_weather")), names->end());
  EXPECT_EQ(std::find(names->begin(), names->end(), vocab().id("Paris")), names->end());
  EXPECT_EQ(std::find(names->begin(), names->end(), vocab().id("x")), names->end());
}

// A call written pretty-printed, a line break and indentation after "{" and between its members,
// stays constrained to its end; whitespace is bounded (a line holds 32 blanks of indentation).
TEST(ToolCallConstraint, Llama3PrettyPrintedCallsStayConstrained) {
  OutputConstraint c(settings(kLlama3, true));
  const std::string call =
      "{\n        \"name\": \"get_weather\",\n        \"parameters\": {\n"
      "            \"city\": \"Paris\"\n        }\n}";
  bool opened = false;
  for (char ch : call) {
    emit(c, std::string(1, ch));
    ASSERT_FALSE(c.broken()) << "at " << ch;
    opened = opened || allowed(c).has_value();
  }
  EXPECT_TRUE(opened);
  EXPECT_TRUE(only_end(allowed(c)));

  OutputConstraint bounded(settings(kLlama3, true));
  for (std::string_view piece : {"{\"", "name", "\":", "\n"}) emit(bounded, piece);
  for (int i = 0; i < 32; ++i) {
    const auto ids = allowed(bounded);
    ASSERT_TRUE(ids.has_value());
    ASSERT_NE(std::find(ids->begin(), ids->end(), vocab().id(" ")), ids->end()) << i;
    emit(bounded, " ");
  }
  const auto ids = allowed(bounded);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(std::find(ids->begin(), ids->end(), vocab().id(" ")), ids->end());
  EXPECT_NE(std::find(ids->begin(), ids->end(), vocab().id("\"")), ids->end());
}

TEST(ToolCallConstraint, Llama3AnswersThatAreNoCallStayFreeUntilThePythonTag) {
  for (std::vector<std::string> start :
       {std::vector<std::string>{"Sure", " thing"}, {"{\"", "a", "\":", "1", "}"}, {"[{\""}}) {
    OutputConstraint c(settings(kLlama3, false));
    for (const std::string& piece : start) {
      emit(c, piece);
      EXPECT_FALSE(allowed(c).has_value()) << piece;
    }
    c.on_emitted(vocab().python_tag);
    EXPECT_TRUE(allowed(c).has_value());
  }
  // The tag written as text opens a call too, and the bytes after it in the token are the call's.
  OutputConstraint c(settings(kLlama3, false));
  for (std::string_view piece :
       {"Sure", "<", "|", "p", "y", "t", "h", "o", "n", "_", "t", "a", "g", "|", ">"})
    emit(c, piece);
  EXPECT_TRUE(allowed(c).has_value());
}

TEST(ToolCallConstraint, Llama3CallsFollowOneAnotherAfterSeparators) {
  OutputConstraint c(settings(kLlama3, false));
  c.on_emitted(vocab().python_tag);
  for (std::string_view piece : {"{\"name\": \"", "search", "\", \"parameters\": ", "{\"", "query",
                                 "\":", " \"", "x", "\"}}"})
    emit(c, piece);
  EXPECT_FALSE(allowed(c).has_value()) << "the call is complete";
  emit(c, ";");
  emit(c, " ");
  EXPECT_FALSE(allowed(c).has_value());
  emit(c, "{");  // the parser reads an object here as the next call
  EXPECT_TRUE(allowed(c).has_value());
  for (std::string_view piece : {"\"", "name", "\":", " \"", "get_weather",
                                 "\", \"parameters\": ", "{\"city\": \"", "Oslo", "\"}}"})
    emit(c, piece);
  EXPECT_FALSE(allowed(c).has_value());
  emit(c, "Sure");  // anything else ends the run: a later '{' is text
  emit(c, "{");
  EXPECT_FALSE(allowed(c).has_value());
}

TEST(ToolCallConstraint, OneCallWhenParallelCallsAreOff) {
  OutputConstraint llama(settings(kLlama3, true));
  for (std::string_view piece :
       {"{\"name\": \"", "get_weather", "\", \"parameters\": ", "{\"city\": \"", "Paris", "\"}}"})
    emit(llama, piece);
  EXPECT_TRUE(only_end(allowed(llama)));

  OutputConstraint list(settings(kMistralList, true));
  list.on_emitted(vocab().tool_calls);
  for (std::string_view piece : {"[{\"", "name", "\":", " \"", "search", "\",", " \"", "arguments",
                                 "\":", " ", "{\"", "query", "\":", " \"", "x", "\"}}"})
    emit(list, piece);
  const auto ids = allowed(list);
  ASSERT_TRUE(ids.has_value());
  EXPECT_NE(std::find(ids->begin(), ids->end(), vocab().id("]")), ids->end());
  EXPECT_EQ(std::find(ids->begin(), ids->end(), vocab().id(",")), ids->end());  // no second call
  emit(list, "]");
  EXPECT_TRUE(only_end(allowed(list)));
}

TEST(ToolCallConstraint, MistralCallsOpenAtTheToolCallsTokenOrItsText) {
  for (bool as_text : {false, true}) {
    OutputConstraint c(settings(kMistralArgs, false));
    emit(c, "Sure");
    EXPECT_FALSE(allowed(c).has_value());
    if (as_text) {
      for (std::string_view piece : {"[", "T", "O", "O", "L", "_", "C", "A", "L", "L", "S", "]"})
        emit(c, piece);
    } else {
      c.on_emitted(vocab().tool_calls);
    }
    const auto ids = allowed(c);
    ASSERT_TRUE(ids.has_value()) << as_text;
    for (std::string_view piece : {"get_weather", "[ARGS]", "{\"city\": \"", "Paris", "\"}"})
      emit(c, piece);
    EXPECT_FALSE(allowed(c).has_value()) << "the call is complete";
  }
  // The list form: the list opens right after the tag.
  OutputConstraint list(settings(kMistralList, false));
  list.on_emitted(vocab().tool_calls);
  const auto ids = allowed(list);
  ASSERT_TRUE(ids.has_value());
  EXPECT_NE(std::find(ids->begin(), ids->end(), vocab().id("[{\"")), ids->end());
  EXPECT_EQ(std::find(ids->begin(), ids->end(), vocab().id("{\"")), ids->end());
}

// ---- Sampled calls read back. ----

// The tools' schemas, checked here by hand (not by the grammar).
bool valid_call(const std::string& name, const OJ& args) {
  if (!args.is_object()) return false;
  if (name == "get_weather") {
    for (const auto& [k, v] : args.items())
      if (k != "city" && k != "days") return false;
    if (!args.contains("city") || (args["city"] != "Paris" && args["city"] != "Oslo")) return false;
    return !args.contains("days") ||
           (args["days"].is_number_integer() && args["days"] >= 1 && args["days"] <= 7);
  }
  if (name == "search") {
    if (args.size() != 1 || !args.contains("query") || !args["query"].is_string()) return false;
    size_t chars = 0;
    for (unsigned char b : args["query"].get<std::string>()) chars += (b & 0xC0) != 0x80;
    return chars <= 8;
  }
  return false;
}

using Call = std::pair<std::string, std::string>;  // name, compact arguments

// The calls a constrained segment's text spells, read as its format says (not by the parser).
std::vector<Call> spelled(Format f, std::string text) {
  std::vector<Call> calls;
  const std::string tag(text::chat::tool_call_tag(f.format));
  if (text.starts_with(tag)) text.erase(0, tag.size());
  if (f.syntax == st::ToolCallSyntax::kMistralArgs) {
    const size_t args = text.find("[ARGS]");
    std::string name = text.substr(0, args);
    name = name.substr(name.find_first_not_of(" \t\n\r"));
    name = name.substr(0, name.find("[CALL_ID]"));
    calls.emplace_back(name, OJ::parse(text.substr(args + 6)).dump());
    return calls;
  }
  const OJ v = OJ::parse(text);
  for (const OJ& call : v.is_array() ? v : OJ::array({v})) {
    const OJ& args = call.contains("parameters") ? call["parameters"] : call["arguments"];
    calls.emplace_back(call["name"].get<std::string>(), args.dump());
  }
  return calls;
}

// One sampled answer: the "model" opens calls in the format's ways (as the answer, after a tag, or
// after another call), writes prose, and inside a call picks uniformly among the allowed tokens.
struct Sampled {
  std::string text;
  std::vector<Call> calls;  // spelled by each constrained segment, in order
};

Sampled sample(Format f, bool single_call, std::mt19937& rng) {
  const Vocab& v = vocab();
  OutputConstraint c(settings(f, single_call));
  Sampled out;
  size_t call_start = std::string::npos;  // where the call being written began in out.text
  bool in_call = false;
  auto put = [&](int32_t id) {
    out.text += v.text[id];
    c.on_emitted(id);
  };
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  // Free text: how the model goes on. A call's opening marks where its text begins.
  auto free_step = [&](bool at_start, bool after_call) {
    const size_t action = pick(4);
    if (action == 0 && !at_start) return false;      // the end
    if (action == 1 || (action == 0 && at_start)) {  // a tag
      call_start = out.text.size();
      put(f.format == ToolCallFormat::kLlama3 ? v.python_tag : v.tool_calls);
    } else if (action == 2 && f.format == ToolCallFormat::kLlama3 && (at_start || after_call)) {
      if (after_call) put(v.id(pick(2) ? ";" : " "));
      call_start = out.text.size();
      put(v.id(pick(2) ? "{" : "{\"name\": \""));  // bare JSON: a call by the parser's rules
    } else {
      put(v.id(pick(2) ? "Sure" : " thing"));
    }
    return true;
  };
  bool at_start = true, after_call = false;
  for (int step = 0; step < 3000; ++step) {
    const std::optional<std::vector<int32_t>> ids = allowed(c);
    if (ids && *ids == std::vector<int32_t>{v.end}) break;  // one call, and the answer is over
    if (ids) {
      EXPECT_FALSE(ids->empty()) << out.text;
      if (ids->empty()) break;
      in_call = true;
      put((*ids)[pick(ids->size())]);
      continue;
    }
    if (in_call) {  // the call just ended
      const std::vector<Call> calls = spelled(f, out.text.substr(call_start));
      out.calls.insert(out.calls.end(), calls.begin(), calls.end());
      in_call = false;
      after_call = true;
    }
    if (!free_step(at_start, after_call)) break;
    at_start = after_call = false;  // until the next call ends
  }
  if (in_call && only_end(allowed(c))) {
    const std::vector<Call> calls = spelled(f, out.text.substr(call_start));
    out.calls.insert(out.calls.end(), calls.begin(), calls.end());
  }
  return out;
}

TEST(ToolCallConstraint, SampledCallsParseAsTheCallsTheirTextSpells) {
  int total = 0;
  for (Format f : {kLlama3, kMistralList, kMistralArgs}) {
    for (bool single : {false, true}) {
      std::mt19937 rng(7);
      for (int n = 0; n < 60; ++n) {
        const Sampled s = sample(f, single, rng);
        text::chat::ParserConfig config;
        config.tool_format = f.format;
        config.tools = kTools;
        if (single) config.max_tool_calls = 1;
        const text::chat::ParsedMessage m = text::chat::OutputParser::parse(config, s.text);
        std::vector<Call> parsed;
        for (const auto& call : m.tool_calls) {
          parsed.emplace_back(call.name, call.arguments);
          EXPECT_TRUE(valid_call(call.name, OJ::parse(call.arguments)))
              << call.name << " " << call.arguments << " in " << s.text;
        }
        EXPECT_EQ(parsed, s.calls) << s.text;
        if (single) {
          EXPECT_LE(s.calls.size(), 1u) << s.text;
        }
        EXPECT_EQ(m.content.find("\"name\""), std::string::npos) << s.text;
        total += static_cast<int>(s.calls.size());
      }
    }
  }
  EXPECT_GT(total, 200);
}

}  // namespace
}  // namespace strata::control
