// Jinja lexer (see lexer.h). Mirrors the behaviour of Jinja2 3.1's regex lexer: newlines are
// normalized and one trailing newline dropped, tag ends are only recognized when brackets are
// balanced, and the text before a tag is stripped according to the tag's modifier.
#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Jinja normalizes \r\n and \r to \n and drops a single trailing newline (keep_trailing_newline
// is off).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the whitespace code point at s[pos] (Python's str.isspace), or 0.
size_t space_length(std::string_view s, size_t pos) {
  auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return py::is_space(c) ? 1 : 0;
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (pos + len > s.size()) return 0;
  std::u32string cp = py::decode(s.substr(pos, len));
  return cp.size() == 1 && py::is_space(cp[0]) ? len : 0;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t n = space_length(s, pos);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

std::string rstrip_space(std::string_view s) { return py::strip(s, std::nullopt, false, true); }

// Python's unicode-escape decoding of a string literal body.
std::string unescape(std::string_view body, int line, int column) {
  std::string out;
  out.reserve(body.size());
  auto hex_value = [&](size_t start, size_t count) -> uint32_t {
    if (start + count > body.size())
      syntax_error("truncated \\x/\\u escape in string", line, column);
    uint32_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      char h = body[start + k];
      int d = is_digit(h)              ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) syntax_error("invalid \\x/\\u escape in string", line, column);
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        py::append_utf8(out, hex_value(i + 1, 2));
        i += 2;
        break;
      case 'u':
      case 'U': {
        size_t n = e == 'u' ? 4 : 8;
        uint32_t cp = hex_value(i + 1, n);
        if (cp > 0x10FFFF) syntax_error("invalid \\U escape in string", line, column);
        py::append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = 0;
          size_t k = 0;
          while (k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7') {
            v = v * 8 + static_cast<uint32_t>(body[i + k] - '0');
            ++k;
          }
          py::append_utf8(out, v);
          i += k - 1;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source)), options_(options) {
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') newlines_.push_back(i);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t open = find_opener(pos);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos), pos);
        break;
      }
      char kind = src_[open + 1];
      char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+')
                      ? src_[open + 2]
                      : 0;
      std::string text = src_.substr(pos, open - pos);
      strip_before_tag(text, sign, kind != '{', line_starting);
      emit_text(std::move(text), pos);
      size_t after_open = open + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(open, after_open, line_starting);
      } else if (auto raw_end = match_raw_begin(after_open); kind == '%' && raw_end) {
        pos = lex_raw(open, *raw_end, line_starting);
      } else {
        pos = lex_tag(open, after_open, kind == '%', line_starting);
      }
    }
    tokens_.push_back(make(TokenType::kEof, src_.size()));
    return std::move(tokens_);
  }

 private:
  Token make(TokenType type, size_t pos, std::string value = {}) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    auto it = std::lower_bound(newlines_.begin(), newlines_.end(), pos);
    t.line = static_cast<int>(it - newlines_.begin()) + 1;
    size_t line_start = it == newlines_.begin() ? 0 : *(it - 1) + 1;
    t.column = static_cast<int>(pos - line_start) + 1;
    return t;
  }

  [[noreturn]] void error_at(size_t pos, const std::string& message) {
    Token t = make(TokenType::kEof, pos);
    syntax_error(message, t.line, t.column);
  }

  size_t find_opener(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char k = src_[p + 1];
      if (k == '{' || k == '%' || k == '#') return p;
      pos = p + 1;
    }
  }

  void strip_before_tag(std::string& text, char sign, bool lstrip_kind, bool line_starting) const {
    if (sign == '-') {
      text = rstrip_space(text);
    } else if (sign != '+' && options_.lstrip_blocks && lstrip_kind) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool only_blanks = std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos),
                                       text.end(), [](char c) { return c == ' ' || c == '\t'; });
        if (only_blanks) text.resize(l_pos);
      }
    }
  }

  void emit_text(std::string text, size_t pos) {
    if (!text.empty()) tokens_.push_back(make(TokenType::kText, pos, std::move(text)));
  }

  // After a tag's closing delimiter at `pos` (with modifier `sign`): skips what trim_blocks or
  // `-` removes, and records whether the consumed text ended a line.
  size_t after_tag_end(size_t pos, char sign, bool trims, bool& line_starting) {
    if (sign == '-') {
      size_t end = skip_space(src_, pos);
      line_starting = end > pos ? src_[end - 1] == '\n' : src_[pos - 1] == '\n';
      return end;
    }
    if (sign != '+' && trims && options_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      line_starting = true;
      return pos + 1;
    }
    line_starting = false;
    return pos;
  }

  size_t lex_comment(size_t open, size_t body, bool& line_starting) {
    for (size_t p = body; p + 1 < src_.size(); ++p) {
      if (src_[p] == '#' && src_[p + 1] == '}') {
        // `+#}` and `-#}` at p-1 take precedence as the earliest match.
        return after_tag_end(p + 2, 0, true, line_starting);
      }
      if ((src_[p] == '-' || src_[p] == '+') && p + 2 < src_.size() && src_[p + 1] == '#' &&
          src_[p + 2] == '}') {
        return after_tag_end(p + 3, src_[p], true, line_starting);
      }
    }
    error_at(open, "Missing end of comment tag");
  }

  // If `{%` at the current tag is `{% raw %}`, returns the position after its closing `%}`
  // (and after the whitespace a `-%}` removes).
  std::optional<size_t> match_raw_begin(size_t pos) const {
    size_t p = skip_space(src_, pos);
    if (src_.compare(p, 3, "raw") != 0) return std::nullopt;
    p += 3;
    if (p < src_.size() && is_name_char(src_[p])) return std::nullopt;
    p = skip_space(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) return skip_space(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::nullopt;
  }

  size_t lex_raw(size_t open, size_t body, bool& line_starting) {
    line_starting = body > 0 && src_[body - 1] == '\n';
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_space(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = skip_space(src_, q + 6);
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, p - body);
      strip_before_tag(text, sign, true, line_starting);
      emit_text(std::move(text), body);
      return after_tag_end(q + 2, end_sign, true, line_starting);
    }
    error_at(open, "Missing end of raw directive");
  }

  // Lexes the expression tokens of a `{{ }}` or `{% %}` tag up to its balanced end delimiter.
  size_t lex_tag(size_t open, size_t pos, bool block, bool& line_starting) {
    tokens_.push_back(make(block ? TokenType::kBlockBegin : TokenType::kVarBegin, open));
    std::vector<char> brackets;
    while (true) {
      pos = skip_space(src_, pos);
      if (pos >= src_.size()) error_at(open, "unexpected end of template, expected end of tag");
      if (brackets.empty()) {
        const char* end = block ? "%}" : "}}";
        char sign = 0;
        size_t end_pos = std::string::npos;
        if ((src_[pos] == '-' || (block && src_[pos] == '+')) &&
            src_.compare(pos + 1, 2, end) == 0) {
          sign = src_[pos];
          end_pos = pos + 3;
        } else if (src_.compare(pos, 2, end) == 0) {
          end_pos = pos + 2;
        }
        if (end_pos != std::string::npos) {
          tokens_.push_back(make(block ? TokenType::kBlockEnd : TokenType::kVarEnd, pos));
          return after_tag_end(end_pos, sign, block, line_starting);
        }
      }
      pos = lex_token(pos, brackets);
    }
  }

  size_t lex_token(size_t pos, std::vector<char>& brackets) {
    char c = src_[pos];
    if (c == '\'' || c == '"') return lex_string(pos);
    if (is_digit(c)) return lex_number(pos);
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back(make(TokenType::kName, pos, src_.substr(pos, end - pos)));
      return end;
    }
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back(make(TokenType::kOperator, pos, op));
        return pos + 2;
      }
    }
    static const std::string_view kOneChar = "+-/*%~[](){}><=.:|,;";
    if (kOneChar.find(c) == std::string_view::npos) {
      error_at(pos, fmt::format("unexpected char {} at {}", repr_char(pos), pos));
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      char expected = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty()) error_at(pos, fmt::format("unexpected '{}'", c));
      if (brackets.back() != expected) {
        error_at(pos, fmt::format("unexpected '{}', expected '{}'", c,
                                  brackets.back() == '('   ? ')'
                                  : brackets.back() == '[' ? ']'
                                                           : '}'));
      }
      brackets.pop_back();
    }
    tokens_.push_back(make(TokenType::kOperator, pos, std::string(1, c)));
    return pos + 1;
  }

  std::string repr_char(size_t pos) const {
    size_t len = 1;
    while (pos + len < src_.size() && (static_cast<unsigned char>(src_[pos + len]) & 0xC0) == 0x80)
      ++len;
    std::string out = "'";
    out.append(src_, pos, len);
    out += '\'';
    return out;
  }

  size_t lex_string(size_t pos) {
    char quote = src_[pos];
    size_t p = pos + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\') ++p;
      ++p;
    }
    if (p >= src_.size())
      error_at(pos, fmt::format("unexpected char {} at {}", repr_char(pos), pos));
    Token t = make(TokenType::kString, pos);
    t.value = unescape(std::string_view(src_).substr(pos + 1, p - pos - 1), t.line, t.column);
    tokens_.push_back(std::move(t));
    return p + 1;
  }

  // Digits with optional single underscores between them, as Jinja's `(\d+_)*\d+`.
  size_t scan_digits(size_t p, bool (*is_valid)(char)) const {
    size_t start = p;
    while (p < src_.size() &&
           (is_valid(src_[p]) ||
            (src_[p] == '_' && p > start && p + 1 < src_.size() && is_valid(src_[p + 1])))) {
      ++p;
    }
    return p;
  }

  size_t lex_number(size_t pos) {
    auto strip = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    auto dec = [](char ch) { return is_digit(ch); };
    // Radix prefixes: 0b, 0o, 0x.
    if (src_[pos] == '0' && pos + 2 < src_.size()) {
      char r = static_cast<char>(src_[pos + 1] | 0x20);
      int base = r == 'b' ? 2 : r == 'o' ? 8 : r == 'x' ? 16 : 0;
      if (base != 0) {
        size_t p = pos + 2;
        std::string digits;
        while (p < src_.size() &&
               (std::isxdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) {
          if (src_[p] != '_') digits += src_[p];
          ++p;
        }
        if (!digits.empty()) return push_integer(pos, p, digits, base);
      }
    }
    size_t int_end = scan_digits(pos, dec);
    bool after_dot = pos > 0 && src_[pos - 1] == '.';
    size_t end = int_end;
    bool is_float = false;
    if (!after_dot) {
      if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
        end = scan_digits(end + 1, dec);
        is_float = true;
      }
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        size_t p = end + 1;
        if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
        if (p < src_.size() && is_digit(src_[p])) {
          end = scan_digits(p, dec);
          is_float = true;
        }
      }
    }
    if (!is_float) return push_integer(pos, int_end, strip(src_.substr(pos, int_end - pos)), 10);
    Token t = make(TokenType::kFloat, pos, src_.substr(pos, end - pos));
    t.float_value = std::strtod(strip(t.value).c_str(), nullptr);
    tokens_.push_back(std::move(t));
    return end;
  }

  size_t push_integer(size_t pos, size_t end, const std::string& digits, int base) {
    Token t = make(TokenType::kInteger, pos, src_.substr(pos, end - pos));
    errno = 0;
    char* stop = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &stop, base);
    if (errno == ERANGE || *stop != '\0' || v > static_cast<unsigned long long>(INT64_MAX)) {
      error_at(pos, "integer literal out of range");
    }
    t.int_value = static_cast<int64_t>(v);
    tokens_.push_back(std::move(t));
    return end;
  }

  std::string src_;
  const LexerOptions& options_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
};

}  // namespace

void syntax_error(const std::string& message, int line, int column) {
  fail(ErrorKind::kInvalidInput, "TemplateSyntaxError: {} (line {}, column {})", message, line,
       column);
}

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace strata::text::jinja
