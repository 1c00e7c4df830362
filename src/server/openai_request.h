// OpenAI request bodies parsed and validated: /v1/chat/completions and /v1/completions. Every
// field OpenAI defines is either honoured or refused with a clear 400 (never silently dropped);
// fields OpenAI does not define are ignored, as OpenAI does. Wrong types and values throw ApiError
// naming the field (`param`), e.g. "messages[2].content".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/sampler.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

// Fields shared by both endpoints.
struct GenerationOptions {
  std::string model;                  // "" when absent
  std::optional<int64_t> max_tokens;  // absent: the rest of the context (chat), 16 (completions)
  runtime::SamplingParams sampling;   // seed is meaningful only when `seed` is set
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  bool ignore_eos = false;  // vLLM's extra: generate until max_tokens
  // Log-probabilities: -1 off; else the alternatives to report per token (chat: top_logprobs
  // 0..20 with logprobs: true; completions: logprobs 0..5).
  int logprobs = -1;
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatCompletionRequest {
  GenerationOptions options;
  OrderedJson messages = OrderedJson::array();  // shape checked; "developer" read as "system"
  OrderedJson tools = nullptr;                  // null or a non-empty checked list
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // for kNamed
  bool parallel_tool_calls = true;
  OrderedJson chat_template_kwargs = OrderedJson::object();
  std::optional<std::string> reasoning_effort;
  std::string response_format;  // its type ("text"), or "" when absent
  // Thinking budget in tokens (max_thinking_tokens, or its aliases thinking_budget and
  // reasoning.max_tokens); absent: the server's configured default.
  std::optional<int64_t> max_thinking_tokens;
};

struct CompletionRequest {
  GenerationOptions options;
  std::variant<std::string, std::vector<int32_t>> prompt;  // text, or token ids
  bool echo = false;
};

// The body as a JSON object; 400 when it is not valid JSON or not an object.
OrderedJson parse_body(std::string_view body);

ChatCompletionRequest parse_chat_request(const OrderedJson& body);
CompletionRequest parse_completion_request(const OrderedJson& body);

}  // namespace strata::server
