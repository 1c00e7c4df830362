// normalize_messages: OpenAI-style chat messages reshaped into what chat templates expect (string
// content where needed, tool-call arguments as objects). The rules are listed in chat_template.h.
#include <string>

#include "core/error.h"
#include "core/json_limits.h"
#include "text/chat/chat_template.h"

namespace strata::text::chat {

namespace {

// A list of content parts: text parts only; either kept as a list or joined into one string.
OrderedJson normalize_parts(const OrderedJson& parts, size_t index, bool keep_content_parts) {
  std::string joined;
  for (size_t p = 0; p < parts.size(); ++p) {
    const OrderedJson& part = parts[p];
    check(part.is_object() && part.contains("type") && part["type"].is_string(),
          ErrorKind::kInvalidInput, "messages[{}].content[{}] must be an object with a 'type'",
          index, p);
    const std::string type = part["type"].get<std::string>();
    check(type == "text", ErrorKind::kUnsupported,
          "messages[{}].content[{}]: content of type '{}' is not supported (text only)", index, p,
          type);
    check(part.contains("text") && part["text"].is_string(), ErrorKind::kInvalidInput,
          "messages[{}].content[{}].text must be a string", index, p);
    if (p > 0) joined += '\n';
    joined += part["text"].get<std::string>();
  }
  return keep_content_parts ? parts : OrderedJson(joined);
}

// tool_calls[*].function.arguments: a JSON string becomes the object it encodes.
void normalize_tool_calls(OrderedJson& calls, size_t index) {
  check(calls.is_array(), ErrorKind::kInvalidInput, "messages[{}].tool_calls must be a list",
        index);
  for (size_t c = 0; c < calls.size(); ++c) {
    OrderedJson& call = calls[c];
    check(call.is_object(), ErrorKind::kInvalidInput,
          "messages[{}].tool_calls[{}] must be an object", index, c);
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) continue;  // the template decides what it needs
    auto args = fn->find("arguments");
    if (args == fn->end() || !args->is_string()) continue;
    const std::string text = args->get<std::string>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      *args = OrderedJson::object();
      continue;
    }
    // A client's text, parsed under the request body's limits: the object it becomes is walked
    // recursively by the template engine.
    LimitedJson parsed = parse_limited_json(text);
    check(parsed.fault != JsonFault::kSyntax, ErrorKind::kInvalidInput,
          "messages[{}].tool_calls[{}].function.arguments is not valid JSON", index, c);
    check(parsed.ok(), ErrorKind::kInvalidInput,
          "messages[{}].tool_calls[{}].function.arguments is refused: {}", index, c,
          parsed.message);
    *args = std::move(parsed.value);
  }
}

}  // namespace

OrderedJson normalize_messages(const OrderedJson& messages, bool keep_content_parts) {
  check(messages.is_array(), ErrorKind::kInvalidInput, "messages must be a list");
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    OrderedJson m = messages[i];
    check(m.is_object(), ErrorKind::kInvalidInput, "messages[{}] must be an object", i);
    check(m.contains("role") && m["role"].is_string(), ErrorKind::kInvalidInput,
          "messages[{}].role must be a string", i);
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      m["content"] = "";
    } else if (content->is_array()) {
      *content = normalize_parts(*content, i, keep_content_parts);
    } else {
      check(content->is_string(), ErrorKind::kInvalidInput,
            "messages[{}].content must be a string, a list of parts or null", i);
    }
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      normalize_tool_calls(*calls, i);
    }
    if (m.contains("reasoning") && !m.contains("reasoning_content")) {
      m["reasoning_content"] = m["reasoning"];
    }
    out.push_back(std::move(m));
  }
  return out;
}

bool ends_in_open_block(std::string_view prompt, std::string_view open, std::string_view close) {
  const size_t last_open = prompt.rfind(open);
  if (last_open == std::string_view::npos) return false;
  const size_t last_close = prompt.rfind(close);
  return last_close == std::string_view::npos || last_open > last_close;
}

}  // namespace strata::text::chat
