// JSON Schema compiled into a byte grammar that accepts JSON texts valid under the schema, for
// constrained decoding. Supported: type (and lists of types), properties with required (written in
// the schema's order; additional properties are never generated), additionalProperties (false, or
// a schema for objects without properties), enum, const, items, minItems, maxItems, anyOf, oneOf
// (read as anyOf), allOf of one schema, $ref to #, #/$defs/... and #/definitions/... (recursion
// cut at a bounded depth), minLength, maxLength, pattern (structured/regex_grammar.h), format
// (date-time, date, time, email, uuid, uri, ipv4, hostname), nullable, and integer minimum /
// maximum / exclusiveMinimum / exclusiveMaximum. For `number`, only a lower bound of 0 or more is
// enforced (no minus sign). Annotations (title, description, examples, default, ...) are ignored;
// any other keyword is refused with Error(kUnsupported) naming it and where it is.
#pragma once

#include <nlohmann/json.hpp>

#include "text/structured/grammar.h"

namespace strata::text::structured {

struct JsonSchemaOptions {
  // Whitespace allowed between tokens, at most this many characters: enough for "\n   " or ", ",
  // and a small model cannot spend its budget on it.
  int max_whitespace = 4;
  // More than 0: also up to max_whitespace blanks, a line break and up to this many blanks of
  // indentation (pretty-printed JSON, as models write tool calls), still bounded.
  int max_indent = 0;
  int ref_depth = 6;        // nested $refs followed before the recursion is cut
  int any_depth = 6;        // nesting of values a schema leaves free (e.g. json_object)
};

// The grammar of JSON texts valid under `schema`: its root rule is the grammar's root.
// Throws Error(kInvalidInput) for a malformed schema, Error(kUnsupported) for what is not
// supported.
Grammar compile_json_schema(const nlohmann::ordered_json& schema,
                            const JsonSchemaOptions& options = {});

// The whitespace allowed between JSON tokens (options' bounds), as a new rule of `grammar`.
Grammar::Rule json_whitespace(Grammar& grammar, const JsonSchemaOptions& options = {});

// Any JSON object (response_format json_object).
Grammar any_json_object(const JsonSchemaOptions& options = {});

// Adds the rule of `schema`'s values to `grammar` (for grammars that embed JSON, such as a tool
// call); `root` is the document its $refs resolve in.
Grammar::Rule add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema,
                              const nlohmann::ordered_json& root,
                              const JsonSchemaOptions& options = {});

}  // namespace strata::text::structured
