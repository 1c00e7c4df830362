// OpenAI Responses responses: the response object, its output items and usage, and the streamed
// form as server-sent events ("event: TYPE\ndata: JSON\n\n", each with a sequence_number from 0):
//   response.created, response.in_progress; per output item response.output_item.added, its
//   content (a message: response.content_part.added, response.output_text.delta ... .done,
//   response.content_part.done; reasoning: the same with reasoning_text parts and
//   response.reasoning_text.delta / .done; a function call: response.function_call_arguments.delta
//   and .done), response.output_item.done; then response.completed or response.incomplete, or an
//   error event and response.failed.
// Output items come from the chat output parser: reasoning as a reasoning item whose content is
// the reasoning text (a model's own thinking, not a summary: summary stays empty), content as a
// message with one output_text part, tool calls as function_call items.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "text/chat/output_parser.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

// "incomplete" for finish_reason "length" (max_output_tokens or the context), else "completed".
std::string response_status(const std::string& finish_reason);

// {input_tokens, input_tokens_details: {cached_tokens, cache_write_tokens}, output_tokens,
// output_tokens_details: {reasoning_tokens}, total_tokens}.
OrderedJson responses_usage_json(const Usage& usage);

// The output items of an answer, each with a fresh id (rs_, msg_, fc_); with `incomplete` the last
// item, when it is reasoning or a message, has status "incomplete".
OrderedJson response_output_json(const text::chat::ParsedMessage& message, bool incomplete);

// The response object: id, object, created_at, status, error, incomplete_details (max_output_tokens
// when incomplete), the request's `settings` (parse_responses_request's) in OpenAI's order with
// model and output among them, and usage (null while in progress).
OrderedJson response_json(const ResponseHeader& header, const OrderedJson& settings,
                          const std::string& status, OrderedJson output, const Usage* usage,
                          OrderedJson error = nullptr);

// The events of one streamed response, made as its parts arrive.
class ResponsesStream {
 public:
  ResponsesStream(ResponseHeader header, OrderedJson settings)
      : header_(std::move(header)), settings_(std::move(settings)) {}

  std::string start();  // response.created and response.in_progress
  // The events of a delta: text of another kind closes the open item and opens its own.
  std::string delta(const text::chat::ParsedDelta& delta);
  // Closes the open item; then response.completed or response.incomplete with the whole response.
  // `strata`: the extension object to add to it, or null.
  std::string finish(const std::string& finish_reason, const Usage& usage,
                     const OrderedJson& strata = nullptr);
  // An error event, then response.failed (error {code: "server_error", message}).
  std::string fail(const ApiError& error);
  // The last response object the events carried: after finish(), the whole response.
  const OrderedJson& response() const { return response_; }

 private:
  enum class Open { kNone, kReasoning, kMessage };
  std::string event(const char* type, OrderedJson fields);
  std::string open_text(Open kind);
  std::string close(bool incomplete);
  std::string call(const text::chat::ToolCall& call);

  ResponseHeader header_;
  OrderedJson settings_;
  OrderedJson response_;
  OrderedJson output_ = OrderedJson::array();  // the items closed so far
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  OrderedJson item_;  // the open item
  std::string text_;  // its text so far
};

}  // namespace strata::server
