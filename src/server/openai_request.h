// OpenAI request bodies parsed and validated: /v1/chat/completions and /v1/completions. Every
// field OpenAI defines is either honoured or refused with a clear 400 (never silently dropped);
// fields OpenAI does not define are ignored, as OpenAI does. Wrong types and values throw ApiError
// naming the field (`param`), e.g. "messages[2].content".
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/speculative_params.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

// Caps on the collections of a request, each a 400 naming the field and the cap when exceeded.
// They bound the work a request can cause before any of it is done (tools and content parts are
// rendered into the prompt, logit_bias entries are applied at every step); the JSON limits of
// parse_body (core/json_limits.h) bound the document as a whole.
inline constexpr size_t kMaxMessages = 100'000;
inline constexpr size_t kMaxContentParts = 1024;  // per message
inline constexpr size_t kMaxToolCalls = 256;      // per assistant message
inline constexpr size_t kMaxTools = 512;
inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxLogitBias = 1024;

// Fields shared by both endpoints.
struct GenerationOptions {
  std::string model;                  // "" when absent
  std::optional<int64_t> max_tokens;  // absent: the rest of the context (chat), 16 (completions)
  runtime::SamplingParams sampling;   // seed is meaningful only when `seed` is set
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  int n = 1;  // choices: each its own sequence (seeds seed, seed + 1, ... when seed is set)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  bool ignore_eos = false;  // vLLM's extra: generate until max_tokens
  bool cache_prompt = true;  // llama.cpp's extra: false neither reuses nor keeps prompt prefixes
  // Log-probabilities: -1 off; else the alternatives to report per token (chat: top_logprobs
  // 0..20 with logprobs: true; completions: logprobs 0..5).
  int logprobs = -1;
  // The strata extension object's "speculative": "ngram", "draft", "self" or "off", or
  // {"method": ..., "draft_max": 1..16, "layers": self's drafting layers, >= 1 (the server checks
  // them against the model's), "adaptive": bool}; absent: the server's default.
  runtime::SpeculativeParams speculative;
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

// The shape an answer must take (structured output), as every route that maps onto chat gives it:
// chat's and completions' response_format, llama.cpp's json_schema and grammar fields, the
// Responses API's text.format, Anthropic's output_format, the strata_grammar extension field.
struct ResponseFormat {
  // "" (absent), "text", "json_object", "json_schema", "regex" (strata_grammar), "gbnf" (grammar)
  std::string type;
  std::string name;  // json_schema's name
  OrderedJson schema = nullptr;  // json_schema's schema
  bool strict = false;
  std::string pattern;  // "regex": the pattern the whole answer must match
  std::string grammar;  // "gbnf": the GBNF text (text/structured/gbnf.h)
  // The field it came in ("response_format", "json_schema", "grammar", "strata_grammar",
  // "text.format", "output_format"): what a 400 about it names.
  std::string param;
  bool constrained() const {
    return type == "json_object" || type == "json_schema" || type == "regex" || type == "gbnf";
  }
};

// A response_format object at `param` (e.g. "response_format", "text.format"): {"type": "text"},
// {"type": "json_object"} (with a "schema" beside the type, as llama.cpp's server takes it: read
// as that json_schema), or {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
// (chat's shape) or with name, schema and strict beside the type (the Responses API's shape).
// Throws ApiError(400) naming the field. The schema is compiled later, against the model
// (Server: an unsupported keyword is a 400 then).
ResponseFormat parse_response_format(const OrderedJson& value, const std::string& param);
// The grammar extension field: {"type": "regex", "pattern": "..."} (the whole answer matches the
// pattern; the regex subset of text/structured/regex_grammar.h).
ResponseFormat parse_strata_grammar(const OrderedJson& value, const std::string& param);

struct ChatCompletionRequest {
  GenerationOptions options;
  OrderedJson messages = OrderedJson::array();  // shape checked; "developer" read as "system"
  OrderedJson tools = nullptr;                  // null or a non-empty checked list
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // for kNamed
  bool parallel_tool_calls = true;
  OrderedJson chat_template_kwargs = OrderedJson::object();
  std::optional<std::string> reasoning_effort;
  // response_format, json_schema, grammar (type "gbnf") or strata_grammar (type "regex"): at most
  // one of them may constrain the answer, a second is a 400 naming it.
  ResponseFormat response_format;
  // Thinking budget in tokens (max_thinking_tokens, or its aliases thinking_budget and
  // reasoning.max_tokens); absent: the server's configured default.
  std::optional<int64_t> max_thinking_tokens;
  // max_tokens is a cap on all output, thinking included, cut to the room the context leaves
  // (Anthropic's max_tokens: agents ask for more than a local context holds). Chat's own
  // max_tokens counts only the answer when think control runs (thinking has its own budget), and
  // one the context cannot hold is a 400.
  bool max_tokens_caps_all_output = false;
};

struct CompletionRequest {
  GenerationOptions options;
  std::variant<std::string, std::vector<int32_t>> prompt;  // text, or token ids
  bool echo = false;
  // The completion's shape, from the fields chat reads it from (response_format, json_schema,
  // grammar, strata_grammar); it constrains the whole generated text.
  ResponseFormat response_format;
};

// The body as a JSON object, read under the default JsonLimits (64 levels, 4096 keys an object,
// 2^20 values): 400 "invalid_json" when it is not valid JSON or not an object, "json_too_deep" or
// "json_too_large" past a limit.
OrderedJson parse_body(std::string_view body);

class Fields;
// The "speculative" choice in a request body's "strata" extension object (every API takes it; see
// GenerationOptions::speculative): a 400 naming strata.speculative... when it is not one.
runtime::SpeculativeParams parse_strata_speculative(const Fields& body);

// What a parsed tool_choice asks of the tools (every API's): a required or named choice needs
// tools, and a named one a tool of that name (else a 400 naming name_param). choice: the choice as
// the error message names it; tool: what the API calls a tool ("tool", "function").
void check_tool_choice(const ChatCompletionRequest& r, std::string_view choice, const std::string& name_param,
                       std::string_view tool = "tool");
ChatCompletionRequest parse_chat_request(const OrderedJson& body);
CompletionRequest parse_completion_request(const OrderedJson& body);


}  // namespace strata::server
