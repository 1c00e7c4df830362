// JSON from outside (request bodies, tool-call arguments, model output) parsed under limits on
// depth, keys per object and values in all, in time linear in the text. Code that walks a document
// recursively (copies, dumps, comparisons, the Jinja engine) relies on the depth limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace strata {

struct JsonLimits {
  size_t max_depth = 64;           // open arrays and objects at once; a scalar alone is depth 0
  size_t max_object_keys = 4096;   // keys written in one object, duplicates included
  size_t max_elements = 1u << 20;  // values of every kind, nested ones and the root included
};

// A model's own files (tokenizer_config.json, ...): as large as they come, since their size is
// bounded by the file's, but no deeper than a request, for the same recursive code reads them.
inline constexpr JsonLimits kModelFileJsonLimits{
    .max_depth = 64, .max_object_keys = SIZE_MAX, .max_elements = SIZE_MAX};

// Why a parse failed: not JSON at all, or one of the limits.
enum class JsonFault { kNone, kSyntax, kTooDeep, kTooManyKeys, kTooManyElements };

struct LimitedJson {
  nlohmann::ordered_json value;  // null unless ok()
  JsonFault fault = JsonFault::kNone;
  std::string message;  // on failure: what was wrong, e.g. "nests deeper than 64 levels"
  bool ok() const { return fault == JsonFault::kNone; }
};

// The document in `text`, equal to nlohmann::ordered_json::parse's for anything within the limits
// (key order kept; a repeated key's last value wins, at the first one's position). Never throws
// for bad input: the fault says what was wrong.
LimitedJson parse_limited_json(std::string_view text, const JsonLimits& limits = {});

// The same, throwing Error(kInvalidInput) "<what>: <message>" on any fault.
nlohmann::ordered_json parse_limited_json_or_throw(std::string_view text, std::string_view what,
                                                   const JsonLimits& limits = {});

}  // namespace strata
