// OpenAI Responses request bodies (POST /v1/responses), checked field by field and put in
// chat-completions form, so that the chat pipeline renders, admits and runs them as it runs chat
// completions and Anthropic messages:
//   instructions, and the input's system and developer messages, wherever they are -> one first
//                                          system message (templates take a system message only
//                                          first)
//   input: a string                        -> a user message
//   input items: messages (user, assistant, system, developer; content a string or input_text /
//     output_text parts)                   -> messages
//   function_call items                    -> the assistant's tool_calls {id: call_id, name,
//                                             arguments}
//   function_call_output items             -> tool messages {tool_call_id: call_id, content}
//   reasoning items (content reasoning_text, else summary summary_text) -> the next assistant
//                                             message's reasoning_content
//   previous_response_id                   -> the stored conversation of that response (its
//                                             items, input and output) before the input
//   tools {type: "function", name, description, parameters, strict} -> chat function tools
//   tool_choice auto / none / required / {type: "function", name}, parallel_tool_calls
//   max_output_tokens                      -> max_tokens, a cap on all output (reasoning too)
//   reasoning.effort none, minimal         -> enable_thinking false
//     low, medium, high, xhigh, max        -> enable_thinking true, the thinking budget a quarter,
//                                             half or all of the server's
//   text.format                            -> response_format, through chat's own check
//   temperature, top_p, stream, user, store, metadata, truncation, include.
// Fields OpenAI defines that strata cannot honour (background, conversation, prompt,
// max_tool_calls, top_logprobs > 0, tools other than functions, images and files) are a 400;
// fields OpenAI does not define are ignored, as in the chat route. Wrong input is a 400 ApiError
// naming the field as OpenAI does ("input[2].content[0].text").
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "server/openai_request.h"

namespace strata::server {

struct ResponsesRequest {
  ChatCompletionRequest chat;  // what runs
  // The conversation in item form: the previous response's (when given), then this input (a
  // string input as one user message item); instructions are not part of it, as in OpenAI's.
  OrderedJson conversation = OrderedJson::array();
  std::string previous_response_id;  // "" when none
  bool store = true;
  // The settings the response object repeats, with OpenAI's defaults filled in: instructions,
  // max_output_tokens, parallel_tool_calls, previous_response_id, reasoning, store, temperature,
  // text, tool_choice, tools (in the Responses shape), top_p, truncation, user, metadata.
  OrderedJson settings = OrderedJson::object();
};

// The conversation items a stored response continues (what previous_response_id names), or
// nullopt when the store does not hold it.
using ConversationLookup = std::function<std::optional<OrderedJson>(const std::string& id)>;

// `server_thinking_budget`: the server's thinking budget, which reasoning.effort scales.
// previous_response_id that `previous` does not find is a 404 (previous_response_not_found).
ResponsesRequest parse_responses_request(const OrderedJson& body, int64_t server_thinking_budget,
                                         const ConversationLookup& previous = {});

}  // namespace strata::server
