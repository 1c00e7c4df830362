// Jinja parser: turns the lexer's tokens into the syntax tree (ast.h), following Jinja2's grammar
// and operator precedence. Syntax errors throw strata::Error with the line and column.
#pragma once

#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace strata::text::jinja {

// Deepest nesting of blocks, and tallest expression tree, a template may have.
constexpr int kMaxBlockNesting = 128;
constexpr int kMaxExpressionDepth = 256;

Body parse(const std::vector<Token>& tokens);

}  // namespace strata::text::jinja
