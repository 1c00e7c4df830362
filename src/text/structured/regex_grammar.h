// A regular expression, in a common subset, compiled into a byte grammar rule: literals (UTF-8),
// classes ([a-z], [^...], \d \w \s and their negations, .), groups, alternation, the quantifiers
// * + ? {n} {n,} {n,m}, and ^ / $ at the ends. Anything else (backreferences, lookaround, anchors
// inside, non-ASCII class ranges) is refused with Error(kUnsupported) naming it. The whole text
// must match (JSON Schema's `pattern` searches, and a full match is one that a search finds).
#pragma once

#include <string_view>

#include "text/structured/grammar.h"

namespace strata::text::structured {

// kJsonString: the text as it appears inside a JSON string (quotes, backslashes and control
// characters escaped), for `pattern` and `format`; kRaw: the bytes themselves (the grammar field).
enum class RegexMode { kJsonString, kRaw };

Grammar::Rule compile_regex(Grammar& grammar, std::string_view pattern, RegexMode mode);

// The characters of a JSON string's contents, one at a time (an unescaped character in UTF-8, or
// an escape), as a rule: what free strings repeat.
Grammar::Rule json_string_char(Grammar& grammar);

}  // namespace strata::text::structured
