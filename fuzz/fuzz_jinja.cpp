// libFuzzer target: any bytes as a chat template, parsed and rendered with a conversation like the
// ones the server passes (system, user, assistant with a tool call, tool result, tools). Syntax and
// render errors must be strata::Error; limits are small so runaway templates end quickly and
// cleanly. A crash, a hang, a sanitizer report or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "text/jinja/template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const auto c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
      {"role": "user", "content": "Thanks! 日本語 ü"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>", "date_string": "26 Jul 2024"
  })");
  return c;
}

strata::text::jinja::Options limits() {
  strata::text::jinja::Options o;
  o.max_output_bytes = 1 << 20;
  o.max_loop_iterations = 100'000;
  o.max_operations = 2'000'000;
  o.now = [] { return std::tm{}; };  // deterministic strftime_now
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const strata::text::jinja::Template t(source, limits());
    t.render(context());
  } catch (const strata::Error&) {
  }
  return 0;
}
