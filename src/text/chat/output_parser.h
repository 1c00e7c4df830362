// Splits a model's generated text into content, reasoning and tool calls, incrementally: feed
// decoded text pieces as they arrive and get deltas that never contain tag text (a piece that
// could be the start of a tag is held back until the next one decides it).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::chat {

// How a model writes tool calls.
enum class ToolCallFormat {
  kNone,      // no tool calls: all text is content
  kHermes,    // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes, Qwen2.5, Qwen3)
  kQwen3Xml,  // <tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>
  kLlama3,    // {"name": ..., "parameters": {...}} at the start, or after <|python_tag|>
  kMistral,   // [TOOL_CALLS][{"name", "arguments"}, ...] or [TOOL_CALLS]NAME[ARGS]{...}
};
const char* tool_call_format_name(ToolCallFormat format);

// The format a chat template's text implies: "<function=" (with "<tool_call>") -> kQwen3Xml,
// "<tool_call>" -> kHermes, "[TOOL_CALLS]" -> kMistral, "<|python_tag|>" or "ipython" -> kLlama3,
// otherwise kNone.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// The text that opens a tool call in `format`, so that the model can only go on writing one: the
// call's start up to where the function's name goes, or with `name` up to where its arguments go.
// mistral_args: the template writes Mistral's later form, [TOOL_CALLS]NAME[ARGS]{...}. Empty for
// kNone.
std::string tool_call_opening(ToolCallFormat format, std::string_view name, bool mistral_args);

// The tag that opens a call in `format`: <tool_call>, <|python_tag|> (Llama 3 also writes a call
// with no tag, as bare JSON that opens its answer) or [TOOL_CALLS]. Empty for kNone.
std::string_view tool_call_tag(ToolCallFormat format);

// Whether an answer's text, its leading whitespace dropped, opens a Llama 3 call written as bare
// JSON, as the parser decides it: `{"name"` or `{"type": "function", "name"`, any whitespace
// between the tokens. nullopt while the text could still go either way.
std::optional<bool> opens_llama3_call(std::string_view text);
// What may come between Llama 3 calls that follow one another: whitespace and ';'.
inline constexpr std::string_view kLlama3CallSeparators = " \t\r\n;";

struct ReasoningTags {
  std::string open = "<think>";
  std::string close = "</think>";
};
// [THINK]/[/THINK] when the template uses them (Magistral), else <think>/</think>.
ReasoningTags detect_reasoning_tags(std::string_view template_source);

struct ParserConfig {
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  // Recognise reasoning blocks in the output (the model may open one itself, e.g. Qwen3).
  bool parse_reasoning = true;
  // The prompt left a reasoning block open: output is reasoning until the close tag.
  bool starts_in_reasoning = false;
  ReasoningTags reasoning_tags;
  // The request's OpenAI tools list (or null): parameter schemas drive kQwen3Xml value coercion.
  nlohmann::ordered_json tools = nullptr;
  // Makes tool-call ids; empty means "call_" + 24 random alphanumerics.
  std::function<std::string()> make_call_id;
  // The most tool calls a message keeps (parallel_tool_calls false: 1); later ones are dropped.
  // 0: no limit.
  size_t max_tool_calls = 0;
};

struct ToolCall {
  int index = 0;   // position among this response's calls
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // a complete JSON object as text (compact, key order kept)
  bool operator==(const ToolCall&) const = default;
};

// What one push() or finish() adds. Tool calls arrive whole, once the model has finished each one.
struct ParsedDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

struct ParsedMessage {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  // finish_reason "tool_calls" applies (when generation stopped normally).
  bool has_tool_calls() const { return !tool_calls.empty(); }
};

// Rules:
// - Reasoning is the text between the open and close tags (and from the start when
//   starts_in_reasoning). Whitespace touching a removed tag is dropped (the "\n" after <think>,
//   the "\n\n" after </think>, the blank line before <tool_call>); other whitespace is kept.
// - A tool-call start tag inside reasoning ends the reasoning (Qwen3.5 sometimes skips </think>).
// - If generation ends while reasoning is still open, that text stays reasoning (the model was cut
//   off: vLLM and mlx-lm do the same; already-streamed deltas cannot move anyway).
// - A tool call that does not parse (bad JSON, missing name, unterminated at the end) falls back to
//   content, tags included, so nothing the model wrote is lost. Never throws on model output.
// - The concatenated deltas of any split of the same text equal parse() of the whole text (with
//   the same call ids).
class OutputParser {
 public:
  explicit OutputParser(ParserConfig config);

  // Feeds the next piece of decoded text; returns what it settles.
  ParsedDelta push(std::string_view text);
  // End of generation: settles everything held back.
  ParsedDelta finish();
  // Everything settled so far (after finish(): the whole message).
  const ParsedMessage& result() const { return result_; }
  const ParserConfig& config() const { return config_; }

  // One shot: push(text) then finish().
  static ParsedMessage parse(const ParserConfig& config, std::string_view text);

 private:
  enum class Mode { kContent, kReasoning, kToolCall };

  void process(bool at_end, ParsedDelta& delta);
  // One transition or emission; false when nothing more can be settled without more text.
  bool step(bool at_end, ParsedDelta& delta);
  bool step_text(bool at_end, ParsedDelta& delta);          // content or reasoning
  bool step_tagged_call(bool at_end, ParsedDelta& delta);   // <tool_call>...</tool_call>
  bool step_mistral_call(bool at_end, ParsedDelta& delta);  // after [TOOL_CALLS]
  bool step_json_calls(bool at_end, ParsedDelta& delta);    // Llama 3 JSON objects
  void enter_tool_call(std::string_view start_tag);
  void fall_back(ParsedDelta& delta);  // the tool call did not parse: its start tag is content
  void leave_tool_call();              // back to content after parsed calls
  void emit_text(std::string_view text, ParsedDelta& delta);
  void emit_call(std::string name, std::string arguments, ParsedDelta& delta);
  std::string next_call_id();
  std::vector<std::string_view> markers() const;  // tags that end the current text mode

  ParserConfig config_;
  Mode mode_;
  std::string buffer_;        // text not yet settled
  std::string pending_ws_;    // whitespace held back: dropped if a tag follows, else emitted
  bool after_tag_ = false;    // the current segment began at a removed tag (drop leading space)
  bool seen_output_ = false;  // any non-whitespace output yet (Llama 3 JSON calls start the output)
  std::string tool_start_;    // the tag that opened the current tool call
  std::string dropped_ws_;    // whitespace dropped before it, restored if the call falls back
  int segment_calls_ = 0;     // calls parsed since tool_start_
  uint64_t id_state_;         // for random call ids
  ParsedMessage result_;
};

}  // namespace strata::text::chat
