// The template for models that ship none: ChatML turns (<|im_start|>role\n...<|im_end|>\n), with
// tools offered and called in the Hermes style (<tool_call>{json}</tool_call>) that the Hermes
// output parser reads back. Content may be a string or a list of text parts.
#include "text/chat/chat_template.h"

namespace strata::text::chat {

namespace {

constexpr const char* kChatMl = R"JINJA({%- macro text_of(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content is iterable -%}{{ content | map(attribute='text') | join('\n') }}
{%- endif -%}
{%- endmacro -%}
{%- set first_is_system = messages and messages[0].role == 'system' -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if first_is_system -%}{{- text_of(messages[0].content) + '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query. The function signatures are within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + tool | tojson -}}{%- endfor -%}
{{- '\n</tools>\n\nFor each function call, return a JSON object with the function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- elif first_is_system -%}
{{- '<|im_start|>system\n' + text_of(messages[0].content) + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'tool' -%}
{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + text_of(message.content) + '\n</tool_response>' -}}
{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + text_of(message.content) -}}
{%- if message.role == 'assistant' and message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- if not loop.first or message.content -%}{{- '\n' -}}{%- endif -%}
{{- '<tool_call>\n{"name": "' + fn.name + '", "arguments": ' + fn.arguments | tojson + '}\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%})JINJA";

}  // namespace

const std::string& ChatTemplate::fallback_source() {
  static const std::string kSource = kChatMl;
  return kSource;
}

ChatTemplate ChatTemplate::fallback(SpecialTokens tokens, const jinja::Options& options) {
  return from_source(fallback_source(), std::move(tokens), "fallback", {}, options);
}

}  // namespace strata::text::chat
