// Builders for OpenAI's response objects, field order as OpenAI sends them.
#include "server/openai_response.h"

#include <chrono>
#include <cmath>
#include <random>

namespace strata::server {

std::string dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string new_response_id(const char* prefix) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return id;
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

OrderedJson usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

OrderedJson tool_calls_json(const std::vector<text::chat::ToolCall>& calls, bool with_index) {
  OrderedJson out = OrderedJson::array();
  for (const auto& call : calls) {
    OrderedJson c;
    if (with_index) c["index"] = call.index;
    c["id"] = call.id;
    c["type"] = "function";
    c["function"] = {{"name", call.name}, {"arguments", call.arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

OrderedJson header_json(const ResponseHeader& h, const char* object) {
  return {{"id", h.id},
          {"object", object},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", nullptr}};
}

OrderedJson reason_or_null(const std::string& finish_reason) {
  return finish_reason.empty() ? OrderedJson(nullptr) : OrderedJson(finish_reason);
}

// A logprob as JSON: -inf (a token the model ruled out) is not JSON; vLLM reports -9999.0.
double logprob_value(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

OrderedJson utf8_bytes(const std::string& s) {
  OrderedJson bytes = OrderedJson::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

OrderedJson chat_token_json(int32_t id, float logprob, const TokenText& text) {
  const std::string t = text(id);
  return {{"token", t}, {"logprob", logprob_value(logprob)}, {"bytes", utf8_bytes(t)}};
}

}  // namespace

OrderedJson chat_logprobs_json(std::span<const OutputLogprob> entries, const TokenText& text) {
  OrderedJson content = OrderedJson::array();
  for (const OutputLogprob& e : entries) {
    OrderedJson entry = chat_token_json(e.value.token, e.value.logprob, text);
    OrderedJson top = OrderedJson::array();
    for (const auto& [id, logprob] : e.value.top) top.push_back(chat_token_json(id, logprob, text));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

OrderedJson completion_logprobs_json(std::span<const OutputLogprob> entries,
                                     const TokenText& text) {
  OrderedJson tokens = OrderedJson::array(), token_logprobs = OrderedJson::array(),
              top_logprobs = OrderedJson::array(), offsets = OrderedJson::array();
  for (const OutputLogprob& e : entries) {
    tokens.push_back(text(e.value.token));
    token_logprobs.push_back(logprob_value(e.value.logprob));
    OrderedJson top = OrderedJson::object();
    for (const auto& [id, logprob] : e.value.top) {
      const std::string t = text(id);
      if (!top.contains(t)) top[t] = logprob_value(logprob);  // most likely first
    }
    if (!top.contains(tokens.back().get<std::string>()))
      top[tokens.back().get<std::string>()] = logprob_value(e.value.logprob);
    top_logprobs.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

OrderedJson chat_completion_json(const ResponseHeader& h, const text::chat::ParsedMessage& m,
                                 const std::string& finish_reason, const Usage& usage,
                                 OrderedJson logprobs) {
  OrderedJson message = {{"role", "assistant"}};
  message["content"] =
      m.content.empty() && m.has_tool_calls() ? OrderedJson(nullptr) : OrderedJson(m.content);
  if (!m.reasoning_content.empty()) {
    message["reasoning_content"] = m.reasoning_content;
    message["reasoning"] = m.reasoning_content;
  }
  if (m.has_tool_calls()) message["tool_calls"] = tool_calls_json(m.tool_calls, false);
  OrderedJson j = header_json(h, "chat.completion");
  j["choices"] = OrderedJson::array({{{"index", 0},
                                      {"message", std::move(message)},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish_reason}}});
  j["usage"] = usage_json(usage);
  return j;
}

OrderedJson delta_json(const text::chat::ParsedDelta& d) {
  OrderedJson delta = OrderedJson::object();
  if (!d.reasoning_content.empty()) {
    delta["reasoning_content"] = d.reasoning_content;
    delta["reasoning"] = d.reasoning_content;
  }
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(d.tool_calls, true);
  return delta;
}

OrderedJson chat_chunk_json(const ResponseHeader& h, OrderedJson delta,
                            const std::string& finish_reason, bool with_usage_field,
                            OrderedJson logprobs) {
  OrderedJson j = header_json(h, "chat.completion.chunk");
  j["choices"] = OrderedJson::array({{{"index", 0},
                                      {"delta", std::move(delta)},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", reason_or_null(finish_reason)}}});
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

OrderedJson usage_chunk_json(const ResponseHeader& h, const char* object, const Usage& usage) {
  OrderedJson j = header_json(h, object);
  j["choices"] = OrderedJson::array();
  j["usage"] = usage_json(usage);
  return j;
}

OrderedJson completion_json(const ResponseHeader& h, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            OrderedJson logprobs) {
  OrderedJson j = header_json(h, "text_completion");
  j["choices"] = OrderedJson::array({{{"index", 0},
                                      {"text", text},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish_reason}}});
  j["usage"] = usage_json(usage);
  return j;
}

OrderedJson completion_chunk_json(const ResponseHeader& h, const std::string& text,
                                  const std::string& finish_reason, bool with_usage_field,
                                  OrderedJson logprobs) {
  OrderedJson j = header_json(h, "text_completion");
  j["choices"] = OrderedJson::array({{{"index", 0},
                                      {"text", text},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", reason_or_null(finish_reason)}}});
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

std::string sse_event(const OrderedJson& data) { return "data: " + dump(data) + "\n\n"; }

}  // namespace strata::server
