// The text of one tool call, per format, turned into a name and JSON arguments. Internal to the
// output parser, which finds where a call starts and ends; these never throw on model output.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::chat::detail {

struct CallText {
  std::string name;
  std::string arguments;  // compact JSON object
};

// Model output as JSON under the request body's limits (core/json_limits.h), or a discarded value
// when it is not JSON or breaks a limit: the model's text is as untrusted as a client's.
nlohmann::ordered_json parse_or_discarded(std::string_view text);

// {"name": ..., "arguments" | "parameters": {...} or a JSON string of one}. nullopt when it is not
// such an object.
std::optional<CallText> call_from_json(const nlohmann::ordered_json& call);

// Between <tool_call> and </tool_call> (Hermes): one call object, or a list of them.
std::optional<std::vector<CallText>> parse_hermes_body(std::string_view body);

// Between <tool_call> and </tool_call> (Qwen3.5 / Qwen3-Coder): one or more
// <function=NAME><parameter=K>V</parameter>...</function> blocks; values coerced by `tools`.
std::optional<std::vector<CallText>> parse_qwen_xml_body(std::string_view body,
                                                         const nlohmann::ordered_json& tools);

// A parameter value as the tool's JSON schema for it says (type integer, number, boolean, object,
// array, null or string, also a list of types or anyOf/oneOf); text that does not fit stays a
// string. With no schema the value is a string.
nlohmann::ordered_json coerce_value(std::string_view value, const nlohmann::ordered_json* schema);

// Where the JSON object or array starting at text[0] ends (one past its closing bracket), or
// nullopt while it is still open. Strings and escapes are honoured; the content is not validated.
std::optional<size_t> json_value_end(std::string_view text);

enum class PrefixMatch { kNo, kPrefix, kYes };
// Whether text starts a Llama 3 JSON call: `{"name"` or `{"type": "function", "name"`, any
// whitespace between tokens. kPrefix: not decided yet.
PrefixMatch match_llama_call_start(std::string_view text);

}  // namespace strata::text::chat::detail
