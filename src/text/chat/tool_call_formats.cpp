// Parsing one tool call's text per format, and coercing Qwen3.5 XML parameter values by the tool's
// JSON schema (as vLLM's and mlx-lm's qwen3_coder parsers do).
#include "text/chat/tool_call_formats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>

#include "core/json_limits.h"

namespace strata::text::chat::detail {

nlohmann::ordered_json parse_or_discarded(std::string_view text) {
  LimitedJson parsed = parse_limited_json(text);
  if (!parsed.ok()) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return std::move(parsed.value);
}

namespace {

using OrderedJson = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

std::string dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

// The "parameters" schema's "properties" of the tool named `name`, or nullptr.
const OrderedJson* tool_properties(const OrderedJson& tools, std::string_view name) {
  if (!tools.is_array()) return nullptr;
  for (const OrderedJson& tool : tools) {
    if (!tool.is_object()) continue;
    const OrderedJson& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || !fn.contains("name") || fn["name"] != name) continue;
    auto params = fn.find("parameters");
    if (params == fn.end() || !params->is_object()) return nullptr;
    auto props = params->find("properties");
    return props != params->end() && props->is_object() ? &*props : nullptr;
  }
  return nullptr;
}

// The type names a schema allows, in its own order: "type" (a name or a list), then anyOf/oneOf.
std::vector<std::string> schema_types(const OrderedJson& schema) {
  std::vector<std::string> types;
  auto add = [&](const OrderedJson& t) {
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const OrderedJson& each : t) {
        if (each.is_string()) types.push_back(each.get<std::string>());
      }
    }
  };
  if (schema.contains("type")) add(schema["type"]);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key) || !schema[key].is_array()) continue;
    for (const OrderedJson& option : schema[key]) {
      if (option.is_object() && option.contains("type")) add(option["type"]);
    }
  }
  return types;
}

std::optional<OrderedJson> as_type(std::string_view value, const std::string& type) {
  const std::string_view text = trim(value);
  if (type == "string") return OrderedJson(std::string(value));
  if (type == "null") return text == "null" ? std::optional<OrderedJson>(nullptr) : std::nullopt;
  if (type == "boolean") {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "true") return OrderedJson(true);
    if (lower == "false") return OrderedJson(false);
    return std::nullopt;
  }
  OrderedJson parsed = parse_or_discarded(text);
  if (parsed.is_discarded()) return std::nullopt;
  if (type == "integer") {
    if (parsed.is_number_integer()) return parsed;
    // "3.0" for an integer: the integer it spells.
    if (parsed.is_number_float() && std::trunc(parsed.get<double>()) == parsed.get<double>() &&
        std::fabs(parsed.get<double>()) < 9.0e15) {
      return OrderedJson(static_cast<int64_t>(parsed.get<double>()));
    }
    return std::nullopt;
  }
  if (type == "number")
    return parsed.is_number() ? std::optional<OrderedJson>(parsed) : std::nullopt;
  if (type == "object")
    return parsed.is_object() ? std::optional<OrderedJson>(parsed) : std::nullopt;
  if (type == "array") return parsed.is_array() ? std::optional<OrderedJson>(parsed) : std::nullopt;
  return std::nullopt;
}

// One Qwen XML value: a single newline after the opening tag and before the closing one is
// layout, not value.
std::string_view strip_one_newline(std::string_view value) {
  if (value.starts_with('\n')) value.remove_prefix(1);
  if (value.ends_with('\n')) value.remove_suffix(1);
  return value;
}

PrefixMatch match_tokens(std::string_view text, std::initializer_list<std::string_view> tokens) {
  size_t i = 0;
  for (std::string_view token : tokens) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) return PrefixMatch::kPrefix;
    const size_t n = std::min(token.size(), text.size() - i);
    if (text.substr(i, n) != token.substr(0, n)) return PrefixMatch::kNo;
    if (n < token.size()) return PrefixMatch::kPrefix;
    i += n;
  }
  return PrefixMatch::kYes;
}

}  // namespace

std::optional<CallText> call_from_json(const OrderedJson& call) {
  if (!call.is_object()) return std::nullopt;
  if (call.contains("function") && call["function"].is_object() && !call.contains("name")) {
    return call_from_json(call["function"]);  // the OpenAI shape, {"function": {...}}
  }
  auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  auto args = call.find("arguments");
  if (args == call.end()) args = call.find("parameters");
  OrderedJson arguments = OrderedJson::object();
  if (args != call.end() && !args->is_null()) {
    arguments = args->is_string() ? parse_or_discarded(args->get<std::string>()) : *args;
    if (!arguments.is_object()) return std::nullopt;
  }
  return CallText{name->get<std::string>(), dump(arguments)};
}

std::optional<std::vector<CallText>> parse_hermes_body(std::string_view body) {
  const OrderedJson parsed = parse_or_discarded(trim(body));
  std::vector<CallText> calls;
  if (parsed.is_array() && !parsed.empty()) {
    for (const OrderedJson& each : parsed) {
      std::optional<CallText> call = call_from_json(each);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  std::optional<CallText> call = call_from_json(parsed);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

std::optional<std::vector<CallText>> parse_qwen_xml_body(std::string_view body,
                                                         const OrderedJson& tools) {
  constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
  constexpr std::string_view kParameter = "<parameter=", kParameterEnd = "</parameter>";
  std::vector<CallText> calls;
  size_t pos = 0;
  while ((pos = body.find(kFunction, pos)) != std::string_view::npos) {
    const size_t name_end = body.find('>', pos + kFunction.size());
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string_view name =
        trim(body.substr(pos + kFunction.size(), name_end - pos - kFunction.size()));
    if (name.empty()) return std::nullopt;
    // A missing </function> (the model went straight to </tool_call>) ends the block at the body's
    // end.
    const size_t fn_end = std::min(body.find(kFunctionEnd, name_end), body.size());
    const std::string_view block = body.substr(name_end + 1, fn_end - name_end - 1);
    const OrderedJson* properties = tool_properties(tools, name);

    OrderedJson arguments = OrderedJson::object();
    size_t p = 0;
    while ((p = block.find(kParameter, p)) != std::string_view::npos) {
      const size_t key_end = block.find('>', p + kParameter.size());
      if (key_end == std::string_view::npos) return std::nullopt;
      const std::string key(
          trim(block.substr(p + kParameter.size(), key_end - p - kParameter.size())));
      if (key.empty()) return std::nullopt;
      size_t value_end = block.find(kParameterEnd, key_end);
      size_t next = value_end + kParameterEnd.size();
      if (value_end == std::string_view::npos) {  // unclosed: the value runs to the next parameter
        value_end = std::min(block.find(kParameter, key_end), block.size());
        next = value_end;
      }
      const std::string_view value =
          strip_one_newline(block.substr(key_end + 1, value_end - key_end - 1));
      const OrderedJson* schema =
          properties != nullptr && properties->contains(key) ? &(*properties)[key] : nullptr;
      arguments[key] = coerce_value(value, schema);
      p = next;
    }
    calls.push_back(CallText{std::string(name), dump(arguments)});
    pos = fn_end;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

OrderedJson coerce_value(std::string_view value, const OrderedJson* schema) {
  if (schema == nullptr || !schema->is_object()) return std::string(value);
  const std::vector<std::string> types = schema_types(*schema);
  // "null" is tried first so that a nullable string still reads `null` as null.
  if (std::find(types.begin(), types.end(), "null") != types.end() && trim(value) == "null") {
    return nullptr;
  }
  for (const std::string& type : types) {
    if (std::optional<OrderedJson> v = as_type(value, type)) return *v;
  }
  return std::string(value);
}

std::optional<size_t> json_value_end(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::nullopt;
}

PrefixMatch match_llama_call_start(std::string_view text) {
  const PrefixMatch plain = match_tokens(text, {"{", "\"name\""});
  const PrefixMatch typed =
      match_tokens(text, {"{", "\"type\"", ":", "\"function\"", ",", "\"name\""});
  if (plain == PrefixMatch::kYes || typed == PrefixMatch::kYes) return PrefixMatch::kYes;
  if (plain == PrefixMatch::kPrefix || typed == PrefixMatch::kPrefix) return PrefixMatch::kPrefix;
  return PrefixMatch::kNo;
}

}  // namespace strata::text::chat::detail
