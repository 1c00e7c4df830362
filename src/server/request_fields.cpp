// Typed field access with OpenAI's error wording, for every API's request parser.
#include "server/request_fields.h"

#include <fmt/format.h>

#include <cmath>

#include "server/api_error.h"

namespace strata::server {

const char* json_type_name(const OrderedJson& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

void wrong_type(const std::string& param, const char* expected, const OrderedJson& got) {
  throw ApiError(400,
                 fmt::format("Invalid type for '{}': expected {}, but got {} instead.", param,
                             expected, json_type_name(got)),
                 param, "invalid_type");
}

void invalid_value(const std::string& param, const std::string& why) {
  throw ApiError(400, fmt::format("Invalid value for '{}': {}", param, why), param,
                 "invalid_value");
}

void missing_field(const std::string& param) {
  bad_request(param, fmt::format("Missing required parameter: '{}'.", param));
}

void unsupported(const std::string& param, const std::string& why) {
  throw ApiError(400, why, param, "unsupported_parameter");
}

void refuse_json(const LimitedJson& parsed, const std::string& what, const std::string& param) {
  switch (parsed.fault) {
    case JsonFault::kNone:
    case JsonFault::kSyntax:
      break;
    case JsonFault::kTooDeep:
      throw ApiError(400, fmt::format("{} is refused: {}.", what, parsed.message), param,
                     "json_too_deep");
    case JsonFault::kTooManyKeys:
    case JsonFault::kTooManyElements:
      throw ApiError(400, fmt::format("{} is refused: {}.", what, parsed.message), param,
                     "json_too_large");
  }
  throw ApiError(400, fmt::format("{} is {}.", what, parsed.message), param, "invalid_json");
}

void check_length(const std::string& param, const OrderedJson& list, size_t max) {
  if (list.size() > max)
    throw ApiError(
        400,
        fmt::format("Invalid '{}': array too long. Expected an array with maximum length "
                    "{}, but got an array with length {} instead.",
                    param, max, list.size()),
        param, "array_above_max_length");
}

std::string Fields::param(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

const OrderedJson* Fields::get(const char* key) const {
  auto it = object_.find(key);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> Fields::number(const char* key, double min, double max) const {
  const OrderedJson* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(param(key), "a number", *v);
  const double x = v->get<double>();
  if (!(x >= min && x <= max))
    invalid_value(param(key),
                  fmt::format("expected a value between {} and {}, got {}.", min, max, x));
  return x;
}

std::optional<int64_t> Fields::integer(const char* key, int64_t min, int64_t max) const {
  const OrderedJson* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_float() && std::nearbyint(v->get<double>()) == v->get<double>() &&
      std::fabs(v->get<double>()) < 9e15)
    return checked(key, static_cast<int64_t>(v->get<double>()), min, max);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    invalid_value(param(key), fmt::format("expected at most {}.", max));
  if (!v->is_number_integer()) wrong_type(param(key), "an integer", *v);
  return checked(key, v->get<int64_t>(), min, max);
}

std::optional<bool> Fields::boolean(const char* key) const {
  const OrderedJson* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) wrong_type(param(key), "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> Fields::string(const char* key) const {
  const OrderedJson* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) wrong_type(param(key), "a string", *v);
  return v->get<std::string>();
}

const OrderedJson* Fields::object(const char* key) const {
  const OrderedJson* v = get(key);
  if (v != nullptr && !v->is_object()) wrong_type(param(key), "an object", *v);
  return v;
}

const OrderedJson* Fields::array(const char* key) const {
  const OrderedJson* v = get(key);
  if (v != nullptr && !v->is_array()) wrong_type(param(key), "an array", *v);
  return v;
}

int64_t Fields::checked(const char* key, int64_t x, int64_t min, int64_t max) const {
  if (x < min || x > max)
    invalid_value(param(key),
                  fmt::format("expected a value between {} and {}, got {}.", min, max, x));
  return x;
}

std::string joined_text(const OrderedJson& parts) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += "\n";
    text += parts[i]["text"].get<std::string>();
  }
  return text;
}

}  // namespace strata::server
