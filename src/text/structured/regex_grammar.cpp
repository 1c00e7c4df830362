// The regex subset, parsed by recursive descent straight into grammar rules.
#include "text/structured/regex_grammar.h"

#include <fmt/format.h>

#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/unicode.h"

namespace strata::text::structured {

namespace {

constexpr int64_t kMaxRepeat = 1000;        // the largest {n,m} bound
constexpr size_t kMaxListedCodePoints = 512;  // non-ASCII code points a class may list

struct CharClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  bool negated = false;
  bool contains(char32_t c) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges) in = in || (c >= lo && c <= hi);
    return in != negated;
  }
};

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

ByteSet range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return s;
}

// Any well-formed UTF-8 sequence of two to four bytes (every code point from U+0080, no
// surrogates, no overlong forms).
Grammar::Rule utf8_multibyte(Grammar& g) {
  const Grammar::Item cont = g.bytes(range(0x80, 0xBF));
  const Grammar::Rule r = g.new_rule();
  g.add(r, {g.bytes(range(0xC2, 0xDF)), cont});
  g.add(r, {g.bytes(range(0xE0, 0xE0)), g.bytes(range(0xA0, 0xBF)), cont});
  ByteSet e;
  e.add_range(0xE1, 0xEC);
  e.add_range(0xEE, 0xEF);
  g.add(r, {g.bytes(e), cont, cont});
  g.add(r, {g.bytes(range(0xED, 0xED)), g.bytes(range(0x80, 0x9F)), cont});
  g.add(r, {g.bytes(range(0xF0, 0xF0)), g.bytes(range(0x90, 0xBF)), cont, cont});
  g.add(r, {g.bytes(range(0xF1, 0xF3)), cont, cont, cont});
  g.add(r, {g.bytes(range(0xF4, 0xF4)), g.bytes(range(0x80, 0x8F)), cont, cont});
  return r;
}

// How an ASCII character appears inside a JSON string: itself, or its escape.
std::optional<std::string> json_escape(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  if (c < 0x20) return fmt::format("\\u{:04x}", static_cast<unsigned>(c));
  return std::nullopt;
}

Grammar::Rule class_rule(Grammar& g, const CharClass& c, RegexMode mode) {
  const Grammar::Rule r = g.new_rule();
  ByteSet plain;
  for (char32_t cp = 0; cp < 0x80; ++cp) {
    if (!c.contains(cp)) continue;
    const std::optional<std::string> escaped =
        mode == RegexMode::kJsonString ? json_escape(cp) : std::nullopt;
    if (escaped) {
      g.add(r, {Grammar::ref(g.literal(*escaped))});
    } else {
      plain.add(static_cast<uint8_t>(cp));
    }
  }
  if (!plain.empty()) g.add(r, {g.bytes(plain)});
  if (c.negated) {
    for (const auto& [lo, hi] : c.ranges)
      if (hi >= 0x80)
        fail(ErrorKind::kUnsupported,
             "regex: a negated class that excludes non-ASCII characters is not supported");
    g.add(r, {Grammar::ref(utf8_multibyte(g))});
    return r;
  }
  size_t listed = 0;
  for (const auto& [lo, hi] : c.ranges) {
    if (hi < 0x80) continue;
    for (char32_t cp = std::max<char32_t>(lo, 0x80); cp <= hi; ++cp) {
      check(++listed <= kMaxListedCodePoints, ErrorKind::kUnsupported,
            "regex: a class may list at most {} non-ASCII characters", kMaxListedCodePoints);
      g.add(r, {Grammar::ref(g.literal(utf8(cp)))});
    }
  }
  return r;
}

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view pattern, RegexMode mode)
      : g_(g), p_(pattern), mode_(mode) {}

  Grammar::Rule parse() {
    const Grammar::Rule r = alternation();
    if (i_ < p_.size()) error("unbalanced ')'");
    return r;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail(ErrorKind::kUnsupported, "regex '{}': {} at offset {}", p_, what, i_);
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Grammar::Rule alternation() {
    std::vector<Grammar::Rule> alts{concatenation()};
    while (at('|')) {
      ++i_;
      alts.push_back(concatenation());
    }
    return alts.size() == 1 ? alts[0] : g_.choice(alts);
  }

  Grammar::Rule concatenation() {
    std::vector<Grammar::Item> items;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      const std::optional<Grammar::Rule> a = atom();
      if (!a) continue;  // an anchor
      items.push_back(Grammar::ref(quantified(*a)));
    }
    return g_.sequence(std::move(items));
  }

  int64_t number() {
    const size_t start = i_;
    int64_t n = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + (p_[i_++] - '0');
      if (n > kMaxRepeat) error(fmt::format("a repetition bound over {}", kMaxRepeat));
    }
    if (i_ == start) error("a malformed {n,m} quantifier");
    return n;
  }

  Grammar::Rule quantified(Grammar::Rule a) {
    int64_t lo = 1, hi = 1;
    if (at('*')) {
      lo = 0, hi = -1, ++i_;
    } else if (at('+')) {
      lo = 1, hi = -1, ++i_;
    } else if (at('?')) {
      lo = 0, hi = 1, ++i_;
    } else if (at('{')) {
      ++i_;
      lo = hi = number();
      if (at(',')) {
        ++i_;
        hi = at('}') ? -1 : number();
      }
      if (!at('}')) error("a malformed {n,m} quantifier");
      ++i_;
      if (hi >= 0 && hi < lo) error("a {n,m} quantifier with m < n");
    } else {
      return a;
    }
    if (at('?')) ++i_;  // lazy: the same language
    if (at('+')) error("possessive quantifiers are not supported");
    if (at('*') || at('{')) error("a quantifier after a quantifier");
    return g_.repeat(a, lo, hi);
  }

  char32_t code_point() {
    size_t pos = i_;
    const char32_t c = next_code_point(p_, pos);
    i_ = pos;
    return c;
  }

  static CharClass of(std::initializer_list<std::pair<char32_t, char32_t>> ranges,
                      bool negated = false) {
    CharClass c;
    c.ranges.assign(ranges.begin(), ranges.end());
    c.negated = negated;
    return c;
  }

  // After a backslash: a class escape (\d ...), or a single character; in_class: \b is a backspace.
  CharClass escape(bool in_class) {
    if (i_ >= p_.size()) error("a trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd': return of({{'0', '9'}});
      case 'D': return of({{'0', '9'}}, true);
      case 'w': return of({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}});
      case 'W': return of({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}, true);
      case 's': return of({{' ', ' '}, {'\t', '\r'}});
      case 'S': return of({{' ', ' '}, {'\t', '\r'}}, true);
      case 'n': return of({{'\n', '\n'}});
      case 't': return of({{'\t', '\t'}});
      case 'r': return of({{'\r', '\r'}});
      case 'f': return of({{'\f', '\f'}});
      case 'v': return of({{'\v', '\v'}});
      case '0': return of({{0, 0}});
      case 'x':
      case 'u': {
        const size_t digits = c == 'x' ? 2 : 4;
        if (i_ + digits > p_.size()) error("a malformed \\x or \\u escape");
        char32_t v = 0;
        for (size_t k = 0; k < digits; ++k) {
          const char h = p_[i_++];
          const int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (d < 0) error("a malformed \\x or \\u escape");
          v = v * 16 + static_cast<char32_t>(d);
        }
        return of({{v, v}});
      }
      case 'b':
        if (in_class) return of({{'\b', '\b'}});
        error("word boundaries (\\b) are not supported");
      default:
        if ((c >= '1' && c <= '9') || c == 'k') error("backreferences are not supported");
        if (c == 'B' || c == 'p' || c == 'P' || c == 'c')
          error(fmt::format("the escape \\{} is not supported", c));
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
          error(fmt::format("the escape \\{} is not supported", c));
        return of({{static_cast<unsigned char>(c), static_cast<unsigned char>(c)}});
    }
  }

  CharClass bracket() {  // after '['
    CharClass c;
    if (at('^')) {
      c.negated = true;
      ++i_;
    }
    bool first = true;
    while (i_ < p_.size() && (first || !at(']'))) {
      first = false;
      char32_t lo;
      if (at('\\')) {
        ++i_;
        CharClass e = escape(true);
        if (e.negated || e.ranges.size() != 1 || e.ranges[0].first != e.ranges[0].second) {
          if (e.negated) error("a negated class escape inside a class is not supported");
          c.ranges.insert(c.ranges.end(), e.ranges.begin(), e.ranges.end());
          continue;
        }
        lo = e.ranges[0].first;
      } else {
        if (at('[') && i_ + 1 < p_.size() && p_[i_ + 1] == ':')
          error("POSIX classes are not supported");
        lo = code_point();
      }
      char32_t hi = lo;
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (at('\\')) {
          ++i_;
          CharClass e = escape(true);
          if (e.negated || e.ranges.size() != 1 || e.ranges[0].first != e.ranges[0].second)
            error("a class range ending in a class escape");
          hi = e.ranges[0].first;
        } else {
          hi = code_point();
        }
        if (hi < lo) error("a class range out of order");
      }
      c.ranges.emplace_back(lo, hi);
    }
    if (!at(']')) error("an unterminated class");
    ++i_;
    return c;
  }

  std::optional<Grammar::Rule> atom() {
    const char c = p_[i_];
    switch (c) {
      case '^':
        if (i_ != 0) error("'^' is supported only at the start");
        ++i_;
        return std::nullopt;
      case '$':
        if (i_ + 1 != p_.size()) error("'$' is supported only at the end");
        ++i_;
        return std::nullopt;
      case '(': {
        ++i_;
        if (at('?')) {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
            i_ += 2;
          } else {
            error("lookaround and named groups are not supported");
          }
        }
        const Grammar::Rule r = alternation();
        if (!at(')')) error("an unterminated group");
        ++i_;
        return r;
      }
      case '[':
        ++i_;
        return class_rule(g_, bracket(), mode_);
      case '.':
        ++i_;
        return class_rule(g_, of({{'\n', '\n'}}, true), mode_);
      case '\\':
        ++i_;
        return class_rule(g_, escape(false), mode_);
      case '*':
      case '+':
      case '?':
      case '{':
        error("nothing to repeat");
      default: {
        const char32_t cp = code_point();
        return class_rule(g_, of({{cp, cp}}), mode_);
      }
    }
  }

  Grammar& g_;
  std::string_view p_;
  RegexMode mode_;
  size_t i_ = 0;
};

}  // namespace

Grammar::Rule compile_regex(Grammar& grammar, std::string_view pattern, RegexMode mode) {
  check(is_valid_utf8(pattern), ErrorKind::kInvalidInput, "regex: the pattern is not UTF-8");
  return RegexParser(grammar, pattern, mode).parse();
}

Grammar::Rule json_string_char(Grammar& g) {
  const Grammar::Rule r = g.new_rule();
  ByteSet plain;
  plain.add_range(0x20, 0x7F);
  plain.bits[0x22 >> 6] &= ~(uint64_t{1} << (0x22 & 63));  // '"'
  plain.bits[0x5C >> 6] &= ~(uint64_t{1} << (0x5C & 63));  // '\'
  g.add(r, {g.bytes(plain)});
  g.add(r, {Grammar::ref(utf8_multibyte(g))});
  ByteSet simple;
  for (char e : std::string_view("\"\\/bfnrt")) simple.add(static_cast<uint8_t>(e));
  const Grammar::Item backslash = g.bytes(range('\\', '\\'));
  g.add(r, {backslash, g.bytes(simple)});
  // \uXXXX, surrogates left out (a lone one is not valid text).
  ByteSet hex;
  hex.add_range('0', '9');
  hex.add_range('a', 'f');
  hex.add_range('A', 'F');
  ByteSet lead;  // every first digit but d/D
  lead.add_range('0', '9');
  lead.add_range('a', 'c');
  lead.add_range('A', 'C');
  lead.add('e');
  lead.add('f');
  lead.add('E');
  lead.add('F');
  ByteSet d;
  d.add('d');
  d.add('D');
  const Grammar::Item u = g.bytes(range('u', 'u')), h = g.bytes(hex);
  g.add(r, {backslash, u, g.bytes(lead), h, h, h});
  g.add(r, {backslash, u, g.bytes(d), g.bytes(range('0', '7')), h, h});
  return r;
}

}  // namespace strata::text::structured
