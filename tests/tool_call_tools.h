// The two tools the tool-call grammar and constraint tests declare: get_weather (a city from an
// enum, days an integer in [1, 7], no other properties) and search (a query of at most 8
// characters).
#pragma once

#include <nlohmann/json.hpp>

namespace strata::test {

inline const nlohmann::ordered_json& weather_and_search_tools() {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"enum": ["Paris", "Oslo"]},
                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
      "properties": {"query": {"type": "string", "maxLength": 8}}, "required": ["query"]}}}])");
  return tools;
}

}  // namespace strata::test
