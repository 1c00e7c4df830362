// Anthropic Messages request bodies (POST /v1/messages and /v1/messages/count_tokens), checked
// field by field and put in chat-completions form, so that one pipeline renders, admits and runs
// both APIs' requests:
//   system (a string or text blocks)      -> a first system message
//   text blocks                           -> content (a string, or text parts)
//   tool_use blocks (assistant)           -> tool_calls {id, function: {name, arguments: input}}
//   tool_result blocks (user)             -> tool messages {tool_call_id, name, content}; an error
//                                            result's content starts with "Error: "
//   thinking blocks (assistant)           -> reasoning_content (redacted_thinking is dropped)
//   tools {name, description, input_schema} -> function tools {name, description, parameters}
//   tool_choice auto / any / tool / none  -> auto / required / named / none;
//     disable_parallel_tool_use           -> parallel_tool_calls false
//   thinking enabled / disabled           -> enable_thinking true (budget_tokens the thinking
//                                            budget) / false; adaptive, between_tools: true
//                                            with the server's budget; absent: the model's
//                                            default
//   stop_sequences, max_tokens (all output, thinking included), temperature, top_p, top_k,
//   metadata.user_id, stream.
// Wrong input is a 400 ApiError naming the field in Anthropic's dotted form
// ("messages.1.content.0.tool_use_id"); fields the API does not define are ignored.
#pragma once

#include "server/openai_request.h"

namespace strata::server {

enum class MessagesRoute {
  kCreate,       // /v1/messages: max_tokens is required
  kCountTokens,  // /v1/messages/count_tokens: no max_tokens, nothing generated
};

ChatCompletionRequest parse_messages_request(const OrderedJson& body,
                                             MessagesRoute route = MessagesRoute::kCreate);

}  // namespace strata::server
