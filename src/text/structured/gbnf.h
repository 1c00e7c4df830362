// GBNF, llama.cpp's grammar format (the `grammar` request field), compiled into a byte grammar.
// A grammar is rules `name ::= alternatives`, one a line (a rule goes on past a newline after `|`
// or inside parentheses); names of letters, digits, `-` and `_`; `root` is what the whole output
// must match. Items: string literals "...", character classes [a-z0-9] and [^...], `.` (any
// character), rule names, groups ( ), alternatives |, and the repeats * + ? {m} {m,} {m,n}.
// Escapes in literals and classes: \n \r \t \\ \" \[ \] \- \xXX \uXXXX \UXXXXXXXX. `#` comments
// run to the end of the line. Terminals are Unicode characters, matched as their UTF-8 bytes.
//
// Refused with Error(kInvalidInput), naming the line, column and rule: malformed text, a rule
// defined twice, a rule used but never defined, no `root`, groups nested past 256, a repeat
// bound past 10,000, a grammar over 1 MiB. Refused with Error(kUnsupported): llama.cpp's token
// matches (<[id]>, <text>, !<...>: strata's grammars match text, not token ids), left recursion
// (a rule that can reach itself before matching a character, as `expr ::= expr "+" term`: the
// automaton cannot run it; a repeat says the same, `expr ::= term ("+" term)*`). Other recursion
// is fine (`value ::= "[" value "]" | "x"`), and so is a repeat of something that can match
// nothing (`("a"?)*`, which llama.cpp refuses): it is built as a repeat of its non-empty matches.
#pragma once

#include <string_view>

#include "text/structured/grammar.h"

namespace strata::text::structured {

// The grammar of `text`: its `root` rule is the grammar's root.
Grammar compile_gbnf(std::string_view text);

}  // namespace strata::text::structured
