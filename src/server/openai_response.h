// OpenAI response bodies: chat.completion and text_completion objects, their streaming chunks,
// usage, log-probabilities, and the SSE framing ("data: {json}\n\n", then "data: [DONE]\n\n").
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "text/chat/output_parser.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens whose state was reused
  int64_t reasoning_tokens = 0;  // completion tokens spent on reasoning
};
OrderedJson usage_json(const Usage& usage);

// What every object of one response shares.
struct ResponseHeader {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
};

std::string new_response_id(const char* prefix);  // prefix + 24 random alphanumerics
int64_t unix_time_now();

OrderedJson tool_calls_json(const std::vector<text::chat::ToolCall>& calls, bool with_index);

// One output token's log-probability as the engine reported it (a token a controller injected
// has logprob 0 and itself as its only alternative: it was certain), and where its text starts in
// the output (in characters, as OpenAI's text_offset counts).
struct OutputLogprob {
  runtime::TokenLogprob value;
  int64_t text_offset = 0;
};
// A token's text, as the response shows it (the tokenizer's decode of that one id).
using TokenText = std::function<std::string(int32_t)>;

// Chat's choices[].logprobs: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}.
OrderedJson chat_logprobs_json(std::span<const OutputLogprob> entries, const TokenText& text);
// Completions' choices[].logprobs: {tokens, token_logprobs, top_logprobs, text_offset}; each
// top_logprobs entry maps token text to logprob for the alternatives and the sampled token.
OrderedJson completion_logprobs_json(std::span<const OutputLogprob> entries, const TokenText& text);

// Non-streaming chat: message {role, content, reasoning_content + reasoning, tool_calls}.
// `logprobs`: the choice's logprobs object, or null.
OrderedJson chat_completion_json(const ResponseHeader& h, const text::chat::ParsedMessage& message,
                                 const std::string& finish_reason, const Usage& usage,
                                 OrderedJson logprobs = nullptr);
// A chunk with one delta (e.g. {"role": "assistant", "content": ""} or {"content": "..."}).
// finish_reason: "" for null. with_usage_field: adds "usage": null (stream_options.include_usage).
OrderedJson chat_chunk_json(const ResponseHeader& h, OrderedJson delta,
                            const std::string& finish_reason, bool with_usage_field,
                            OrderedJson logprobs = nullptr);
OrderedJson delta_json(const text::chat::ParsedDelta& delta);
// The last chunk when include_usage: no choices, the usage.
OrderedJson usage_chunk_json(const ResponseHeader& h, const char* object, const Usage& usage);

OrderedJson completion_json(const ResponseHeader& h, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            OrderedJson logprobs = nullptr);
OrderedJson completion_chunk_json(const ResponseHeader& h, const std::string& text,
                                  const std::string& finish_reason, bool with_usage_field,
                                  OrderedJson logprobs = nullptr);

std::string sse_event(const OrderedJson& data);  // "data: ...\n\n"
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Compact JSON text; invalid UTF-8 (never expected) becomes U+FFFD instead of throwing.
std::string dump(const OrderedJson& j);

}  // namespace strata::server
