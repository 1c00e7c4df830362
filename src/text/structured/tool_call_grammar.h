// The grammar of a tool call's text, from just after what opens it (a tag, or nothing for Llama 3's
// bare JSON) to its end, so that a constrained call always names a declared tool and carries
// arguments valid under that tool's `parameters` schema, in a form the output parser
// (text/chat/output_parser.h) reads back as that call.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/structured/grammar.h"
#include "text/structured/json_schema.h"

namespace strata::text::structured {

enum class ToolCallSyntax {
  // After <tool_call>: {"name": N, "arguments": {...}} then </tool_call> (Qwen2.5, Qwen3).
  kHermes,
  // After <tool_call>: <function=N><parameter=K>V</parameter>...</function></tool_call> (Qwen3.5;
  // string values written raw, others as JSON, the way the parser coerces them back).
  kQwenXml,
  // One JSON object, {"name": N, "parameters": {...}} ("arguments" also; an opening
  // "type": "function" also), after <|python_tag|>, at the answer's start, or after another call.
  kLlama3,
  // After [TOOL_CALLS]: a list [{"name": N, "arguments": {...}}, ...], each call may end with the
  // "id" Mistral's templates write (Mistral 7B v0.3, Nemo).
  kMistralList,
  // After [TOOL_CALLS]: N[ARGS]{...}, or N[CALL_ID]ID[ARGS]{...} (Mistral Small 3.2, Devstral,
  // Ministral 3). Only names of [A-Za-z0-9_.-] can be written so (the parser stops a name there).
  kMistralArgs,
};

struct ToolCallOptions {
  // parallel_tool_calls false: a Mistral list holds one call (in the other syntaxes a grammar is
  // one call already; the constraint ends the answer after it).
  bool single_call = false;
  // The arguments' schemas, and the whitespace between a call's tokens: a call may be written
  // pretty-printed (a line break and indentation after "{"), as models write them.
  JsonSchemaOptions json = {.max_indent = 32};
};

// tools: the request's OpenAI tools list (each {"type": "function", "function": {"name",
// "parameters"}}). A tool whose parameters schema cannot be compiled gets calls that name it with
// free arguments (any JSON object; in the XML syntax any parameters). Throws
// Error(kInvalidInput) for no tools, Error(kUnsupported) when no tool can be named in `syntax`.
Grammar tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallSyntax syntax,
                          const ToolCallOptions& options = {});

// The special tokens a call in `syntax` writes past its opening: Mistral's [ARGS] and [CALL_ID],
// control tokens in its tokenizers, which a constraint's vocabulary must keep writable for the
// model to write the call as it was taught.
std::vector<std::string> tool_call_special_tokens(ToolCallSyntax syntax);

}  // namespace strata::text::structured
