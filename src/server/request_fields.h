// Reading a request's JSON fields with their types and ranges, shared by the API parsers (OpenAI's
// openai_request, Anthropic's anthropic_request): a wrong type or value throws a 400 ApiError
// naming the field (`param`) in OpenAI's wording ("Invalid type for 'temperature': expected a
// number, but got a string instead."). Each API names its fields its own way; the caller passes
// the names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/json_limits.h"

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

const char* json_type_name(const OrderedJson& v);  // "a string", "an object", ...

[[noreturn]] void wrong_type(const std::string& param, const char* expected,
                             const OrderedJson& got);
[[noreturn]] void invalid_value(const std::string& param, const std::string& why);
[[noreturn]] void missing_field(const std::string& param);  // "Missing required parameter: '…'."
[[noreturn]] void unsupported(const std::string& param, const std::string& why);

// JSON text of the client's that parse_limited_json refused: a 400 whose code tells a syntax error
// ("invalid_json") from a limit ("json_too_deep", "json_too_large"). `what` names the text.
[[noreturn]] void refuse_json(const LimitedJson& parsed, const std::string& what,
                              const std::string& param);

// A list past its cap, in OpenAI's words for its own caps (e.g. 128 tools).
void check_length(const std::string& param, const OrderedJson& list, size_t max);

// The "text" of each of parts (checked text parts), joined by newlines.
std::string joined_text(const OrderedJson& parts);

// Typed access to the fields of one JSON object; null counts as absent, as in OpenAI's API.
// `prefix` names the object ("" for the body): a field's param is prefix + "." + key.
class Fields {
 public:
  Fields(const OrderedJson& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  std::string param(std::string_view key) const;
  const OrderedJson* get(const char* key) const;

  std::optional<double> number(const char* key, double min, double max) const;
  std::optional<int64_t> integer(const char* key, int64_t min,
                                 int64_t max) const;  // 5.0 reads as 5
  std::optional<bool> boolean(const char* key) const;
  std::optional<std::string> string(const char* key) const;
  const OrderedJson* object(const char* key) const;
  const OrderedJson* array(const char* key) const;

 private:
  int64_t checked(const char* key, int64_t x, int64_t min, int64_t max) const;

  const OrderedJson& object_;
  std::string prefix_;
};

}  // namespace strata::server
