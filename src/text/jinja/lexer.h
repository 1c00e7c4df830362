// Jinja lexer: splits a template into text and tag tokens, applying Jinja2's whitespace rules
// (trim_blocks, lstrip_blocks, `-`/`+` modifiers, newline normalization, raw blocks), and tokenizes
// the expressions inside `{{ }}` and `{% %}`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::jinja {

enum class TokenType {
  kText,
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;  // text, name, decoded string literal, or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws strata::Error (kInvalidInput) "TemplateSyntaxError: ... (line L, column C)".
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

// The message format shared by the lexer and the parser.
[[noreturn]] void syntax_error(const std::string& message, int line, int column);

}  // namespace strata::text::jinja
