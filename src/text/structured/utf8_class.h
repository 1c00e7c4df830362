// A class of Unicode characters as a byte grammar: code point ranges compiled to the UTF-8 byte
// sequences that encode them (each range cut into pieces whose bytes vary independently, so a
// range of any width costs a handful of alternatives, never one per code point).
#pragma once

#include <utility>
#include <vector>

#include "text/structured/grammar.h"

namespace strata::text::structured {

using CodePointRanges = std::vector<std::pair<char32_t, char32_t>>;  // inclusive, any order

// One character whose code point is in `ranges` (negated: in none of them, over all of Unicode).
// Surrogates never match (UTF-8 has no form for them), nor does anything past U+10FFFF. An
// ASCII-only class is a single byte set; any other class a new rule. An empty class matches
// nothing.
Grammar::Item code_point_class(Grammar& grammar, CodePointRanges ranges, bool negated = false);

}  // namespace strata::text::structured
