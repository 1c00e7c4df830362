// The path of a request body through the server before tokenization, for the request fuzzers:
// parse_body, the validators (OpenAI's chat, completions and responses, Anthropic's messages and
// count_tokens), a GBNF `grammar` compiled as the server compiles it, and for a chat request
// normalisation, the fallback template and the output parser's setup. Only ApiError or
// strata::Error may end it; anything else is a bug.
#pragma once

#include <string_view>

#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/responses_request.h"
#include "text/chat/chat_template.h"
#include "text/structured/gbnf.h"

namespace strata::fuzz {

inline const text::chat::ChatTemplate& fallback_template() {
  static const auto t =
      text::chat::ChatTemplate::fallback({{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  return t;
}

// The answer's shape compiled, where it is a GBNF grammar (JSON schemas and regexes are compiled
// against the model's vocabulary, which this path has not).
inline void compile_shape(const server::ResponseFormat& f) {
  if (f.type != "gbnf") return;
  try {
    text::structured::compile_gbnf(f.grammar);
  } catch (const Error&) {
  }
}

// A chat request as the server renders it (the fallback template standing in for the model's).
inline void render(const server::ChatCompletionRequest& r) {
  text::chat::ChatRequest chat;
  chat.messages = r.messages;
  chat.tools = r.tools;
  chat.kwargs = r.chat_template_kwargs;
  chat.reasoning_effort = r.reasoning_effort;
  try {
    const text::chat::RenderedPrompt prompt = fallback_template().render(chat);
    fallback_template().parser_config(prompt, r.tools);
  } catch (const Error&) {
  }
}

inline void render_chat(const server::OrderedJson& body) {
  server::ChatCompletionRequest r;
  try {
    r = server::parse_chat_request(body);
  } catch (const server::ApiError&) {
    return;
  }
  compile_shape(r.response_format);
  render(r);
}

inline void run_request(std::string_view text) {
  server::OrderedJson body;
  try {
    body = server::parse_body(text);
  } catch (const server::ApiError&) {
    return;
  }
  render_chat(body);
  try {
    compile_shape(server::parse_completion_request(body).response_format);
  } catch (const server::ApiError&) {
  }
}

// A /v1/messages (and /v1/messages/count_tokens) body: parsed into chat form, then rendered.
inline void run_messages_request(std::string_view text) {
  server::OrderedJson body;
  try {
    body = server::parse_body(text);
  } catch (const server::ApiError&) {
    return;
  }
  for (const server::MessagesRoute route :
       {server::MessagesRoute::kCreate, server::MessagesRoute::kCountTokens}) {
    server::ChatCompletionRequest r;
    try {
      r = server::parse_messages_request(body, route);
    } catch (const server::ApiError&) {
      continue;
    }
    render(r);
  }
}

// A /v1/responses body: parsed into chat form (previous_response_id, when given, continuing a
// stored conversation of every input item kind), then rendered.
inline void run_responses_request(std::string_view text) {
  server::OrderedJson body;
  try {
    body = server::parse_body(text);
  } catch (const server::ApiError&) {
    return;
  }
  static const server::OrderedJson stored = server::OrderedJson::parse(R"([
    {"type": "message", "role": "user", "content": "Weather?"},
    {"type": "reasoning", "id": "rs_1", "summary": [],
     "content": [{"type": "reasoning_text", "text": "Call the tool."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}", "status": "completed"}])");
  const server::ConversationLookup lookup =
      [](const std::string& id) -> std::optional<server::OrderedJson> {
    if (id == "resp_1") return stored;
    return std::nullopt;
  };
  server::ResponsesRequest r;
  try {
    r = server::parse_responses_request(body, 1000, lookup);
  } catch (const server::ApiError&) {
    return;
  }
  render(r.chat);
}

}  // namespace strata::fuzz
