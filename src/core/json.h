// JSON helpers over nlohmann::json: parse a file with a clear error, typed field access with the
// field path in the message.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"

namespace strata {

using Json = nlohmann::json;

Json parse_json(const std::string& text, const std::string& what);  // what: e.g. a file path
Json read_json_file(const std::string& path);

// get_or(j, "key", fallback): j[key] as T when present and not null; throws kInvalidInput on a
// wrong type, naming the key.
template <typename T>
T get_or(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(ErrorKind::kInvalidInput, "field '{}' has the wrong type ({})", key, it->type_name());
  }
}

}  // namespace strata
