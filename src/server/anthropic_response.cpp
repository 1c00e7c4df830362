// Builders for Anthropic's message object and stream events, field order as Anthropic sends them.
#include "server/anthropic_response.h"

#include <fmt/format.h>

#include "core/hash.h"

namespace strata::server {
namespace {

// A tool call's arguments (a JSON object's text, from the output parser) as the object.
OrderedJson tool_input(const std::string& arguments) {
  OrderedJson input = OrderedJson::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : OrderedJson::object();
}

OrderedJson tool_use_block(const text::chat::ToolCall& call, OrderedJson input) {
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}};
}

OrderedJson or_null(const std::string& s) {
  return s.empty() ? OrderedJson(nullptr) : OrderedJson(s);
}

}  // namespace

std::string anthropic_stop_reason(const std::string& finish_reason,
                                  const std::string& stop_sequence) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  return stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

OrderedJson anthropic_usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

std::string thinking_signature(std::string_view thinking) {
  return fmt::format("strata-{:016x}", hash64(thinking));
}

OrderedJson anthropic_message_json(const ResponseHeader& h, const text::chat::ParsedMessage& m,
                                   const std::string& finish_reason,
                                   const std::string& stop_sequence, const Usage& usage) {
  OrderedJson content = OrderedJson::array();
  if (!m.reasoning_content.empty())
    content.push_back({{"type", "thinking"},
                       {"thinking", m.reasoning_content},
                       {"signature", thinking_signature(m.reasoning_content)}});
  if (!m.content.empty()) content.push_back({{"type", "text"}, {"text", m.content}});
  for (const auto& call : m.tool_calls)
    content.push_back(tool_use_block(call, tool_input(call.arguments)));
  const std::string reason = anthropic_stop_reason(finish_reason, stop_sequence);
  return {{"id", h.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", h.model},
          {"content", std::move(content)},
          {"stop_reason", reason},
          {"stop_sequence",
           reason == "stop_sequence" ? OrderedJson(stop_sequence) : OrderedJson(nullptr)},
          {"usage", anthropic_usage_json(usage)}};
}

std::string anthropic_event(const OrderedJson& data) {
  return "event: " + data["type"].get<std::string>() + "\ndata: " + dump(data) + "\n\n";
}

std::string AnthropicStream::start(int64_t input_tokens) const {
  Usage prompt;
  prompt.prompt_tokens = input_tokens;
  const OrderedJson message = {{"id", header_.id},
                               {"type", "message"},
                               {"role", "assistant"},
                               {"model", header_.model},
                               {"content", OrderedJson::array()},
                               {"stop_reason", nullptr},
                               {"stop_sequence", nullptr},
                               {"usage", anthropic_usage_json(prompt)}};
  return anthropic_event({{"type", "message_start"}, {"message", message}}) + ping();
}

std::string AnthropicStream::ping() { return anthropic_event({{"type", "ping"}}); }

std::string AnthropicStream::error(const ApiError& e) {
  return anthropic_event(e.to_json(ErrorFormat::kAnthropic));
}

std::string AnthropicStream::open(OrderedJson content_block, Block kind) {
  std::string out = close();
  ++index_;
  open_ = kind;
  out += anthropic_event({{"type", "content_block_start"},
                          {"index", index_},
                          {"content_block", std::move(content_block)}});
  return out;
}

std::string AnthropicStream::close() {
  if (open_ == Block::kNone) return {};
  std::string out;
  if (open_ == Block::kThinking) {
    out += block_delta({{"type", "signature_delta"}, {"signature", thinking_signature(thinking_)}});
    thinking_.clear();
  }
  open_ = Block::kNone;
  return out + anthropic_event({{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::block_delta(OrderedJson delta) const {
  return anthropic_event(
      {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
}

std::string AnthropicStream::delta(const text::chat::ParsedDelta& d) {
  // Within one delta the parser settled the text in this order: reasoning, content, tool calls.
  std::string out;
  if (!d.reasoning_content.empty()) {
    if (open_ != Block::kThinking)
      out += open({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, Block::kThinking);
    thinking_ += d.reasoning_content;
    out += block_delta({{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) out += open({{"type", "text"}, {"text", ""}}, Block::kText);
    out += block_delta({{"type", "text_delta"}, {"text", d.content}});
  }
  for (const auto& call : d.tool_calls) {
    // A call arrives whole: its block opens, carries the input as one piece of JSON, and closes.
    out += open(tool_use_block(call, OrderedJson::object()), Block::kNone);
    out += block_delta(
        {{"type", "input_json_delta"}, {"partial_json", dump(tool_input(call.arguments))}});
    out += anthropic_event({{"type", "content_block_stop"}, {"index", index_}});
  }
  return out;
}

std::string AnthropicStream::finish(const std::string& finish_reason,
                                    const std::string& stop_sequence, const Usage& usage,
                                    const OrderedJson& strata) {
  std::string out = close();
  const std::string reason = anthropic_stop_reason(finish_reason, stop_sequence);
  OrderedJson event = {{"type", "message_delta"},
                       {"delta",
                        {{"stop_reason", reason},
                         {"stop_sequence", reason == "stop_sequence" ? or_null(stop_sequence)
                                                                     : OrderedJson(nullptr)}}},
                       {"usage", anthropic_usage_json(usage)}};
  if (!strata.is_null()) event["strata"] = strata;
  out += anthropic_event(event);
  return out + anthropic_event({{"type", "message_stop"}});
}

}  // namespace strata::server
