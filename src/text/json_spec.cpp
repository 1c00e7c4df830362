// Checked access to tokenizer.json fields with errors that name the field.
#include "text/json_spec.h"

#include "core/error.h"
#include "text/unicode.h"

namespace strata::text {

namespace {

std::string describe(const Json& spec) {
  if (spec.is_object()) {
    auto it = spec.find("type");
    if (it != spec.end() && it->is_string()) return it->get<std::string>();
  }
  return "component";
}

}  // namespace

const Json& spec_field(const Json& spec, const char* key) {
  if (!spec.is_object()) fail(ErrorKind::kInvalidInput, "tokenizer: expected an object");
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {} is missing field '{}'", describe(spec), key);
  }
  return *it;
}

std::string spec_type(const Json& spec, const char* what) {
  if (!spec.is_object()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {} must be an object, got {}", what,
         spec.type_name());
  }
  auto it = spec.find("type");
  if (it == spec.end() || !it->is_string()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {} has no string 'type'", what);
  }
  return it->get<std::string>();
}

std::string spec_string(const Json& spec, const char* key) {
  const Json& v = spec_field(spec, key);
  if (!v.is_string()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {}.{} must be a string, got {}", describe(spec), key,
         v.type_name());
  }
  return v.get<std::string>();
}

std::string spec_string_or(const Json& spec, const char* key, std::string fallback) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  return spec_string(spec, key);
}

bool spec_bool_or(const Json& spec, const char* key, bool fallback) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {}.{} must be a boolean, got {}", describe(spec),
         key, it->type_name());
  }
  return it->get<bool>();
}

int64_t spec_int_or(const Json& spec, const char* key, int64_t fallback) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {}.{} must be an integer, got {}", describe(spec),
         key, it->type_name());
  }
  return it->get<int64_t>();
}

std::string spec_char(const Json& spec, const char* key, std::string_view fallback) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return std::string(fallback);
  const std::string s = spec_string(spec, key);
  size_t pos = 0;
  if (s.empty() || !is_valid_utf8(s) || (next_code_point(s, pos), pos != s.size())) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {}.{} must be a single character, got '{}'",
         describe(spec), key, s);
  }
  return s;
}

PatternSpec spec_pattern(const Json& spec, const char* key) {
  const Json& p = spec_field(spec, key);
  if (p.is_object()) {
    if (auto it = p.find("Regex"); it != p.end() && it->is_string()) {
      return {true, it->get<std::string>()};
    }
    if (auto it = p.find("String"); it != p.end() && it->is_string()) {
      return {false, it->get<std::string>()};
    }
  }
  fail(ErrorKind::kInvalidInput, "tokenizer: {}.{} must be {{\"String\": ..}} or {{\"Regex\": ..}}",
       describe(spec), key);
}

}  // namespace strata::text
