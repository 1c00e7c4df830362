// Anthropic Messages responses: the message object, its usage and stop reason, and the streamed
// form as server-sent events with Anthropic's names and order:
//   message_start, ping, then per content block content_block_start, content_block_delta
//   (text_delta, thinking_delta then one signature_delta, input_json_delta), content_block_stop;
//   then message_delta (stop_reason, stop_sequence, usage) and message_stop; or an error event.
// Content blocks come from the chat output parser: reasoning as thinking blocks, content as text
// blocks, tool calls as tool_use blocks (their arguments parsed into `input`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "text/chat/output_parser.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

// A generation's end in Anthropic's words: "tool_calls" -> "tool_use", "length" -> "max_tokens",
// "stop" -> "stop_sequence" when `stop_sequence` (the stop string that matched) is not empty,
// else "end_turn".
std::string anthropic_stop_reason(const std::string& finish_reason,
                                  const std::string& stop_sequence);

// {input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens}: input
// tokens are the prompt's tokens that were not read from the prefix cache, as Anthropic counts
// them (the total input is their sum).
OrderedJson anthropic_usage_json(const Usage& usage);

// The signature of a thinking block strata wrote: stable for the same text (a hash of it), so a
// client that sends the block back sends what it got. strata does not check signatures.
std::string thinking_signature(std::string_view thinking);

// The whole message: {id, type, role, model, content, stop_reason, stop_sequence, usage}.
OrderedJson anthropic_message_json(const ResponseHeader& header,
                                   const text::chat::ParsedMessage& message,
                                   const std::string& finish_reason,
                                   const std::string& stop_sequence, const Usage& usage);

// "event: NAME\ndata: JSON\n\n"; the name is the data's "type".
std::string anthropic_event(const OrderedJson& data);

// The events of one streamed message, made as its parts arrive.
class AnthropicStream {
 public:
  explicit AnthropicStream(ResponseHeader header) : header_(std::move(header)) {}

  // message_start (the message with no content yet, usage with the prompt's tokens) and a ping.
  std::string start(int64_t input_tokens) const;
  // The events of a delta: a block of another kind closes the open one and starts its own.
  std::string delta(const text::chat::ParsedDelta& delta);
  // Closes the open block; then message_delta (the stop reason, and the whole usage, which corrects
  // message_start's prompt count by the cached tokens) and message_stop. `strata`: the extension
  // object to add to message_delta, or null.
  std::string finish(const std::string& finish_reason, const std::string& stop_sequence,
                     const Usage& usage, const OrderedJson& strata = nullptr);
  static std::string ping();
  static std::string error(const ApiError& error);

 private:
  enum class Block { kNone, kText, kThinking };
  std::string open(OrderedJson content_block, Block kind);
  std::string close();
  std::string block_delta(OrderedJson delta) const;

  ResponseHeader header_;
  Block open_ = Block::kNone;  // the kind of the open block (tool_use blocks close at once)
  int index_ = -1;             // the last block's index
  std::string thinking_;       // the open thinking block's text, for its signature
};

}  // namespace strata::server
