// The grammar of a tool call's text, from just after its opening tag (<tool_call>) through its
// closing tag, so that a constrained call always names a declared tool and carries arguments valid
// under that tool's `parameters` schema. Two syntaxes: Hermes (a JSON object with "name" and
// "arguments": Qwen2.5, Qwen3) and Qwen3.5's XML (<function=NAME><parameter=K>V</parameter>...,
// string values written raw, others as JSON, the way the output parser coerces them back).
#pragma once

#include <nlohmann/json.hpp>

#include "text/structured/grammar.h"
#include "text/structured/json_schema.h"

namespace strata::text::structured {

enum class ToolCallSyntax { kHermes, kQwenXml };

// tools: the request's OpenAI tools list (each {"type": "function", "function": {"name",
// "parameters"}}). Throws like compile_json_schema for a parameters schema it cannot compile.
Grammar tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallSyntax syntax,
                          const JsonSchemaOptions& options = {});

}  // namespace strata::text::structured
