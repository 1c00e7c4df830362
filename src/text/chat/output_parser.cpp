// OutputParser: a small state machine (content, reasoning, tool call) over a buffer of unsettled
// text. Text modes emit everything except a tail that could still become a tag; tool-call mode
// waits until the call is complete, then emits it whole or falls back to content.
#include "text/chat/output_parser.h"

#include <algorithm>
#include <random>
#include <utility>

#include "text/chat/tool_call_formats.h"

namespace strata::text::chat {

namespace {

constexpr std::string_view kWhitespace = " \t\r\n";
constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_name_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '-' || c == '.';
}

// The longest tail of `text` that is a proper prefix of one of `markers`.
size_t partial_marker_length(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t longest = 0;
  for (std::string_view marker : markers) {
    for (size_t len = std::min(marker.size() - 1, text.size()); len > longest; --len) {
      if (text.substr(text.size() - len) == marker.substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kQwen3Xml:
      return "qwen3_xml";
    case ToolCallFormat::kLlama3:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "unknown";
}

ToolCallFormat detect_tool_call_format(std::string_view source) {
  const bool tool_call_tag = source.find(kToolCallOpen) != std::string_view::npos;
  if (tool_call_tag && source.find("<function=") != std::string_view::npos) {
    return ToolCallFormat::kQwen3Xml;
  }
  if (tool_call_tag) return ToolCallFormat::kHermes;
  if (source.find(kMistralCalls) != std::string_view::npos) return ToolCallFormat::kMistral;
  if (source.find(kPythonTag) != std::string_view::npos ||
      source.find("ipython") != std::string_view::npos) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kNone;
}

std::string tool_call_opening(ToolCallFormat format, std::string_view name, bool mistral_args) {
  const std::string quoted = nlohmann::ordered_json(std::string(name)).dump();  // a JSON string
  const std::string tag(kToolCallOpen);
  switch (format) {
    case ToolCallFormat::kHermes:
      return tag +
             (name.empty() ? "\n{\"name\": \"" : "\n{\"name\": " + quoted + ", \"arguments\": ");
    case ToolCallFormat::kQwen3Xml:
      return tag + "\n<function=" + (name.empty() ? "" : std::string(name) + ">\n");
    case ToolCallFormat::kLlama3:
      return name.empty() ? "{\"name\": \"" : "{\"name\": " + quoted + ", \"parameters\": ";
    case ToolCallFormat::kMistral: {
      const std::string calls(kMistralCalls);
      if (name.empty()) return calls;
      return mistral_args ? calls + std::string(name) + "[ARGS]"
                          : calls + "[{\"name\": " + quoted + ", \"arguments\": ";
    }
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

std::string_view tool_call_tag(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Xml:
      return kToolCallOpen;
    case ToolCallFormat::kLlama3:
      return kPythonTag;
    case ToolCallFormat::kMistral:
      return kMistralCalls;
    case ToolCallFormat::kNone:
      break;
  }
  return {};
}

std::optional<bool> opens_llama3_call(std::string_view text) {
  switch (detail::match_llama_call_start(text)) {
    case detail::PrefixMatch::kYes:
      return true;
    case detail::PrefixMatch::kNo:
      return false;
    case detail::PrefixMatch::kPrefix:
      break;
  }
  return std::nullopt;
}

ReasoningTags detect_reasoning_tags(std::string_view source) {
  if (source.find("[THINK]") != std::string_view::npos) return ReasoningTags{"[THINK]", "[/THINK]"};
  return ReasoningTags{};
}

OutputParser::OutputParser(ParserConfig config)
    : config_(std::move(config)),
      mode_(config_.starts_in_reasoning ? Mode::kReasoning : Mode::kContent),
      after_tag_(config_.starts_in_reasoning),
      id_state_((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) {}

ParsedDelta OutputParser::push(std::string_view text) {
  ParsedDelta delta;
  buffer_.append(text);
  process(/*at_end=*/false, delta);
  return delta;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta delta;
  process(/*at_end=*/true, delta);
  if (!pending_ws_.empty()) {  // trailing whitespace that no tag followed is text after all
    std::string& channel = mode_ == Mode::kReasoning ? delta.reasoning_content : delta.content;
    std::string& total = mode_ == Mode::kReasoning ? result_.reasoning_content : result_.content;
    channel += pending_ws_;
    total += pending_ws_;
    pending_ws_.clear();
  }
  return delta;
}

ParsedMessage OutputParser::parse(const ParserConfig& config, std::string_view text) {
  OutputParser parser(config);
  parser.push(text);
  parser.finish();
  return parser.result();
}

void OutputParser::process(bool at_end, ParsedDelta& delta) {
  while (step(at_end, delta)) {
  }
}

bool OutputParser::step(bool at_end, ParsedDelta& delta) {
  if (mode_ != Mode::kToolCall) return step_text(at_end, delta);
  switch (config_.tool_format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Xml:
      return step_tagged_call(at_end, delta);
    case ToolCallFormat::kMistral:
      return step_mistral_call(at_end, delta);
    case ToolCallFormat::kLlama3:
      return step_json_calls(at_end, delta);
    case ToolCallFormat::kNone:
      break;
  }
  fall_back(delta);  // unreachable: kNone has no start tags
  return true;
}

std::vector<std::string_view> OutputParser::markers() const {
  std::vector<std::string_view> tags;
  // Inside reasoning the open tag is dropped too: some models repeat the one the prompt opened.
  if (mode_ == Mode::kReasoning || config_.parse_reasoning) {
    tags.push_back(config_.reasoning_tags.open);
  }
  if (mode_ == Mode::kReasoning) tags.push_back(config_.reasoning_tags.close);
  tags.push_back(tool_call_tag(config_.tool_format));
  std::erase_if(tags, [](std::string_view t) { return t.empty(); });
  return tags;
}

bool OutputParser::step_text(bool at_end, ParsedDelta& delta) {
  // Llama 3 writes a call as bare JSON at the very start of its output.
  const bool json_call_possible = mode_ == Mode::kContent &&
                                  config_.tool_format == ToolCallFormat::kLlama3 && !seen_output_ &&
                                  config_.tools.is_array() && !config_.tools.empty();
  if (json_call_possible) {
    const size_t start = buffer_.find_first_not_of(kWhitespace);
    emit_text(std::string_view(buffer_).substr(0, std::min(start, buffer_.size())), delta);
    buffer_.erase(0, std::min(start, buffer_.size()));
    if (start == std::string::npos) return false;
    const detail::PrefixMatch match = detail::match_llama_call_start(buffer_);
    if (match == detail::PrefixMatch::kYes) {
      enter_tool_call("");
      return true;
    }
    if (match == detail::PrefixMatch::kPrefix && !at_end) return false;
    seen_output_ = true;  // ordinary text: no bare JSON call can follow
  }

  const std::vector<std::string_view> tags = markers();
  size_t at = std::string::npos;
  std::string_view tag;
  for (std::string_view t : tags) {
    const size_t found = buffer_.find(t);
    if (found < at) {
      at = found;
      tag = t;
    }
  }
  if (at == std::string::npos) {
    const size_t hold = at_end ? 0 : partial_marker_length(buffer_, tags);
    emit_text(std::string_view(buffer_).substr(0, buffer_.size() - hold), delta);
    buffer_.erase(0, buffer_.size() - hold);
    return false;
  }
  emit_text(std::string_view(buffer_).substr(0, at), delta);
  const std::string tag_text(tag);
  buffer_.erase(0, at + tag.size());
  if (mode_ == Mode::kContent && tag_text == config_.reasoning_tags.open) {
    pending_ws_.clear();
    mode_ = Mode::kReasoning;
    after_tag_ = true;
  } else if (mode_ == Mode::kReasoning && tag_text == config_.reasoning_tags.open) {
    // A repeated open tag: nothing to do but drop it.
  } else if (mode_ == Mode::kReasoning && tag_text == config_.reasoning_tags.close) {
    pending_ws_.clear();
    mode_ = Mode::kContent;
    after_tag_ = true;
  } else {
    enter_tool_call(tag_text);
  }
  return true;
}

bool OutputParser::step_tagged_call(bool at_end, ParsedDelta& delta) {
  const size_t close = buffer_.find(kToolCallClose);
  if (close == std::string::npos && !at_end) return false;
  // Unterminated at the end of generation: the call may still be complete without its close tag.
  const size_t body_end = std::min(close, buffer_.size());
  const std::string_view body = std::string_view(buffer_).substr(0, body_end);
  // Either body form is accepted whatever the template taught: models mix them up.
  auto calls = config_.tool_format == ToolCallFormat::kQwen3Xml
                   ? detail::parse_qwen_xml_body(body, config_.tools)
                   : detail::parse_hermes_body(body);
  if (!calls) {
    calls = config_.tool_format == ToolCallFormat::kQwen3Xml
                ? detail::parse_hermes_body(body)
                : detail::parse_qwen_xml_body(body, config_.tools);
  }
  if (!calls) {
    fall_back(delta);
    return true;
  }
  for (detail::CallText& call : *calls)
    emit_call(std::move(call.name), std::move(call.arguments), delta);
  buffer_.erase(0, close == std::string::npos ? buffer_.size() : close + kToolCallClose.size());
  leave_tool_call();
  return true;
}

bool OutputParser::step_mistral_call(bool at_end, ParsedDelta& delta) {
  // Text that may still grow into a call: wait for more, or at the end give up on it.
  auto incomplete = [&] {
    if (!at_end) return false;
    fall_back(delta);
    return true;
  };
  const size_t start = buffer_.find_first_not_of(kWhitespace);
  if (start == std::string::npos) return incomplete();
  const std::string_view rest = std::string_view(buffer_).substr(start);

  std::vector<detail::CallText> calls;
  size_t consumed = 0;
  if (rest[0] == '[' || rest[0] == '{') {  // [{"name": ..., "arguments": {...}}, ...]
    const std::optional<size_t> end = detail::json_value_end(rest);
    if (!end) return incomplete();
    const auto parsed = detail::parse_or_discarded(rest.substr(0, *end));
    const nlohmann::ordered_json list =
        parsed.is_object() ? nlohmann::ordered_json::array({parsed}) : parsed;
    if (!list.is_array() || list.empty()) {
      fall_back(delta);
      return true;
    }
    for (const auto& each : list) {
      std::optional<detail::CallText> call = detail::call_from_json(each);
      if (!call) {
        fall_back(delta);
        return true;
      }
      calls.push_back(std::move(*call));
    }
    consumed = start + *end;
  } else {  // NAME[ARGS]{...}, optionally NAME[CALL_ID]ID[ARGS]{...}
    size_t i = 0;
    while (i < rest.size() && is_name_char(rest[i])) ++i;
    if (i == rest.size()) return incomplete();
    const std::string name(rest.substr(0, i));
    if (name.empty()) {
      fall_back(delta);
      return true;
    }
    auto expect = [&](std::string_view tag) -> int {  // 1: found, 0: undecided, -1: not there
      const std::string_view here = rest.substr(i, tag.size());
      if (here == tag) return 1;
      return tag.starts_with(here) ? 0 : -1;
    };
    if (expect(kMistralCallId) == 0 || expect(kMistralArgs) == 0) return incomplete();
    if (expect(kMistralCallId) == 1) {
      i += kMistralCallId.size();
      while (i < rest.size() && is_name_char(rest[i])) ++i;
      if (i == rest.size() || expect(kMistralArgs) == 0) return incomplete();
    }
    if (expect(kMistralArgs) != 1) {
      fall_back(delta);
      return true;
    }
    i += kMistralArgs.size();
    while (i < rest.size() && kWhitespace.find(rest[i]) != std::string_view::npos) ++i;
    if (i == rest.size()) return incomplete();
    if (rest[i] != '{') {
      fall_back(delta);
      return true;
    }
    const std::optional<size_t> end = detail::json_value_end(rest.substr(i));
    if (!end) return incomplete();
    const auto args = detail::parse_or_discarded(rest.substr(i, *end));
    std::optional<detail::CallText> call =
        detail::call_from_json(nlohmann::ordered_json{{"name", name}, {"arguments", args}});
    if (!call) {
      fall_back(delta);
      return true;
    }
    calls.push_back(std::move(*call));
    consumed = start + i + *end;
  }
  for (detail::CallText& call : calls)
    emit_call(std::move(call.name), std::move(call.arguments), delta);
  buffer_.erase(0, consumed);
  leave_tool_call();
  return true;
}

bool OutputParser::step_json_calls(bool at_end, ParsedDelta& delta) {
  // Calls are JSON objects separated by whitespace or ';'. Whatever follows them is content.
  auto stop = [&] {
    if (segment_calls_ == 0) {
      fall_back(delta);
    } else {
      leave_tool_call();
    }
    return true;
  };
  const size_t start = buffer_.find_first_not_of(kLlama3CallSeparators);
  if (start == std::string::npos) {
    if (!at_end) return false;
    buffer_.clear();
    return stop();
  }
  if (buffer_[start] != '{') {
    if (segment_calls_ > 0) buffer_.erase(0, start);
    return stop();
  }
  const std::string_view rest = std::string_view(buffer_).substr(start);
  const std::optional<size_t> end = detail::json_value_end(rest);
  if (!end) return at_end ? stop() : false;
  const auto parsed = detail::parse_or_discarded(rest.substr(0, *end));
  std::optional<detail::CallText> call = detail::call_from_json(parsed);
  if (!call) return stop();
  emit_call(std::move(call->name), std::move(call->arguments), delta);
  buffer_.erase(0, start + *end);
  ++segment_calls_;
  return true;
}

void OutputParser::enter_tool_call(std::string_view start_tag) {
  dropped_ws_ = std::exchange(pending_ws_, std::string());
  tool_start_ = std::string(start_tag);
  mode_ = Mode::kToolCall;
  segment_calls_ = 0;
  seen_output_ = true;
}

void OutputParser::fall_back(ParsedDelta& delta) {
  mode_ = Mode::kContent;
  after_tag_ = false;
  const std::string text = std::exchange(dropped_ws_, std::string()) + tool_start_;
  tool_start_.clear();
  emit_text(text, delta);  // the buffer after the tag is read again as content
}

void OutputParser::leave_tool_call() {
  mode_ = Mode::kContent;
  after_tag_ = true;
  tool_start_.clear();
  dropped_ws_.clear();
}

void OutputParser::emit_text(std::string_view text, ParsedDelta& delta) {
  if (after_tag_) {
    const size_t first = text.find_first_not_of(kWhitespace);
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    after_tag_ = false;
  }
  const size_t last = text.find_last_not_of(kWhitespace);
  if (last == std::string_view::npos) {
    pending_ws_.append(text);
    return;
  }
  std::string out = std::exchange(pending_ws_, std::string(text.substr(last + 1)));
  out.append(text.substr(0, last + 1));
  if (mode_ == Mode::kReasoning) {
    delta.reasoning_content += out;
    result_.reasoning_content += out;
  } else {
    delta.content += out;
    result_.content += out;
    seen_output_ = true;
  }
}

void OutputParser::emit_call(std::string name, std::string arguments, ParsedDelta& delta) {
  if (config_.max_tool_calls > 0 && result_.tool_calls.size() >= config_.max_tool_calls) return;
  ToolCall call;
  call.index = static_cast<int>(result_.tool_calls.size());
  call.id = next_call_id();
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  result_.tool_calls.push_back(call);
  delta.tool_calls.push_back(std::move(call));
}

std::string OutputParser::next_call_id() {
  if (config_.make_call_id) return config_.make_call_id();
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) {
    // splitmix64
    uint64_t z = (id_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    id += kAlphabet[z % kAlphabet.size()];
  }
  return id;
}

}  // namespace strata::text::chat
