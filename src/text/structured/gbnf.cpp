// GBNF parsed by recursive descent straight into grammar rules (as regex_grammar.cpp does): named
// rules get their rule on first sight, used or defined; the grammar is then checked whole (every
// used rule defined, a root, no open repeat of what may match nothing, no left recursion).
#include "text/structured/gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "text/structured/utf8_class.h"
#include "text/unicode.h"

namespace strata::text::structured {

namespace {

constexpr size_t kMaxTextBytes = size_t{1} << 20;
constexpr int kMaxNesting = 256;        // groups inside groups
constexpr int64_t kMaxRepeat = 10'000;  // the largest {m,n} bound (a rule per count)
constexpr size_t kNowhere = static_cast<size_t>(-1);

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

struct NamedRule {
  std::string name;
  Grammar::Rule rule = 0;
  size_t defined_at = kNowhere;  // offset of its definition
  size_t first_use = kNowhere;   // offset of its first reference
  size_t first_user = 0;         // the definition that reference is in
};

class GbnfCompiler {
 public:
  explicit GbnfCompiler(std::string_view text) : t_(text) {}

  Grammar compile() {
    if (t_.size() > kMaxTextBytes)
      fail(ErrorKind::kInvalidInput, "the grammar is {} bytes, over the limit of {}", t_.size(),
           kMaxTextBytes);
    if (const size_t valid = valid_utf8_prefix(t_); valid < t_.size())
      error(valid, "the text is not valid UTF-8");
    skip_space(true);
    while (i_ < t_.size()) definition();
    check_whole();
    return std::move(g_);
  }

 private:
  // An error at offset `at`: its line and column and the rule being read.
  [[noreturn]] void error(size_t at, std::string_view what,
                          ErrorKind kind = ErrorKind::kInvalidInput) const {
    const std::string rule =
        current_ == kNowhere ? "" : fmt::format(" (rule '{}')", defs_[current_].name);
    fail(kind, "{}{}: {}", where(at), rule, what);
  }

  std::string where(size_t at) const {  // "line L, column C" (in bytes)
    const std::string_view before = t_.substr(0, std::min(at, t_.size()));
    const size_t line_start = before.rfind('\n');
    return fmt::format(
        "line {}, column {}", 1 + std::count(before.begin(), before.end(), '\n'),
        before.size() - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1);
  }

  std::string describe(size_t at) const {  // what lies at `at`, for "found ..." messages
    if (at >= t_.size()) return "the end of the grammar";
    const auto c = static_cast<unsigned char>(t_[at]);
    if (c == '\n' || c == '\r') return "the end of the line";
    if (c >= 0x20 && c < 0x7F) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02X}", c);
  }

  bool at(char c) const { return i_ < t_.size() && t_[i_] == c; }

  // Spaces, tabs and comments; line breaks too when `newlines` (between rules, inside groups,
  // after '|').
  void skip_space(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != '\r') ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view name() {
    const size_t start = i_;
    while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    return t_.substr(start, i_ - start);
  }

  // The named rule `name`, its grammar rule made on first sight.
  NamedRule& named(std::string_view name) {
    auto [it, fresh] = index_.try_emplace(std::string(name), defs_.size());
    if (fresh) {
      owner_.resize(g_.rule_count(), current_);  // rules made so far belong to the one being read
      NamedRule def;
      def.name = std::string(name);
      def.rule = g_.new_rule();
      owner_.push_back(defs_.size());
      defs_.push_back(std::move(def));
    }
    return defs_[it->second];
  }

  void definition() {
    const size_t start = i_;
    const std::string_view n = name();
    if (n.empty())
      error(start, fmt::format("expected a rule name, found {} (a rule ends at the end of its "
                               "line: go on past a line break after '|' or inside parentheses)",
                               describe(start)));
    const Grammar::Rule rule = named(n).rule;
    current_ = index_.at(std::string(n));
    if (defs_[current_].defined_at != kNowhere)
      error(start, fmt::format("rule '{}' is defined twice (first at {})", n,
                               where(defs_[current_].defined_at)));
    defs_[current_].defined_at = start;
    skip_space(false);
    if (t_.substr(i_, 3) != "::=")
      error(i_, fmt::format("expected '::=' after the rule name, found {}", describe(i_)));
    i_ += 3;
    skip_space(true);
    alternatives(rule, /*nested=*/false, 0);
    bool ended = i_ >= t_.size();  // a rule ends with its line (\n, \r\n or \r)
    for (char end : {'\r', '\n'})
      if (at(end)) {
        ++i_;
        ended = true;
      }
    if (!ended) {
      error(i_, fmt::format("unexpected {}{}", describe(i_),
                            at(')')   ? " (no group is open)"
                            : at(':') ? " (a rule ends at the end of its line: put the next one "
                                        "on a line of its own)"
                                      : ""));
    }
    owner_.resize(g_.rule_count(), current_);
    current_ = kNowhere;
    skip_space(true);
  }

  void alternatives(Grammar::Rule into, bool nested, int depth) {
    g_.add(into, sequence(nested, depth));
    while (at('|')) {
      ++i_;
      skip_space(true);
      g_.add(into, sequence(nested, depth));
    }
  }

  std::vector<Grammar::Item> sequence(bool nested, int depth) {
    std::vector<Grammar::Item> items;
    size_t last = kNowhere;  // where the last item's items begin: what a repeat applies to
    while (i_ < t_.size()) {
      const size_t start = i_;
      const char c = t_[i_];
      if (c == '"') {
        last = items.size();
        literal(items);
      } else if (c == '[') {
        last = items.size();
        items.push_back(char_class());
      } else if (c == '.') {
        ++i_;
        last = items.size();
        items.push_back(cached_class({{0, 0x10FFFF}}, false));
      } else if (is_name_char(c)) {
        last = items.size();
        NamedRule& used = named(name());
        if (used.first_use == kNowhere) {
          used.first_use = start;
          used.first_user = current_;
        }
        items.push_back(Grammar::ref(used.rule));
      } else if (c == '(') {
        last = items.size();
        items.push_back(Grammar::ref(group(depth)));
      } else if (c == '<' || c == '!') {
        error(start,
              "token matches (<[id]>, <text>, !<...>) are not supported: strata's grammars "
              "match text, not token ids",
              ErrorKind::kUnsupported);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == kNowhere) error(start, fmt::format("'{}' has nothing before it to repeat", c));
        repeat(items, last, nested);
      } else {
        break;
      }
      skip_space(nested);
    }
    return items;
  }

  Grammar::Rule group(int depth) {
    const size_t open = i_++;
    if (depth + 1 > kMaxNesting)
      error(open, fmt::format("groups are nested more than {} deep", kMaxNesting));
    skip_space(true);
    const Grammar::Rule r = g_.new_rule();
    alternatives(r, /*nested=*/true, depth + 1);
    if (!at(')'))
      error(i_, fmt::format("expected ')' to close the group opened at {}, found {}", where(open),
                            describe(i_)));
    ++i_;
    return r;
  }

  int64_t number() {
    const size_t start = i_;
    int64_t n = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      n = n * 10 + (t_[i_++] - '0');
      if (n > kMaxRepeat) error(start, fmt::format("a repeat bound over {}", kMaxRepeat));
    }
    if (i_ == start) error(start, fmt::format("expected a number, found {}", describe(start)));
    return n;
  }

  // A repeat (* + ? {m} {m,} {m,n}) of the items from `last` on, which it replaces.
  void repeat(std::vector<Grammar::Item>& items, size_t last, bool nested) {
    const size_t start = i_;
    int64_t lo = 0, hi = -1;
    const char c = t_[i_++];
    if (c == '+') {
      lo = 1;
    } else if (c == '?') {
      hi = 1;
    } else if (c == '{') {
      skip_space(nested);
      lo = hi = number();
      skip_space(nested);
      if (at(',')) {
        ++i_;
        skip_space(nested);
        hi = i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' ? number() : -1;
        skip_space(nested);
      }
      if (!at('}'))
        error(i_, fmt::format("expected ',' or '}}' in the repeat at {}, found {}", where(start),
                              describe(i_)));
      ++i_;
      if (hi >= 0 && hi < lo)
        error(start, fmt::format("the repeat {{{},{}}} has its maximum below its minimum", lo, hi));
    }
    const bool one_rule = items.size() - last == 1 && items[last].is_rule;
    if (one_rule && merge(items[last].value, lo, hi)) return;
    const Grammar::Rule body =
        one_rule ? items[last].value
                 : g_.sequence(std::vector<Grammar::Item>(
                       items.begin() + static_cast<ptrdiff_t>(last), items.end()));
    items.resize(last);
    const Grammar::Rule stand_in = g_.new_rule();
    repeats_.emplace(stand_in, Repeat{body, lo, hi, current_});
    stand_in_for(stand_in);
    items.push_back(Grammar::ref(stand_in));
  }

  // A repeat is built once the whole grammar is read (build_repeats); until then its rule has a
  // stand-in definition that matches the empty string exactly when the repeat does.
  void stand_in_for(Grammar::Rule rule) {
    const Repeat& r = repeats_.at(rule);
    g_.clear(rule);
    if (r.lo == 0) {
      g_.add(rule, {});
    } else {
      g_.add(rule, {Grammar::ref(r.body)});
    }
  }

  // A repeat of a repeat, x{a,b}{c,d}, as one, x{a·c,b·d}, where that is the same language (a is
  // 0 or 1, so the counts run without gaps) and the bound stays in range: `x?+` is `x*`, and a
  // stack of them does not nest rules that a text can match in many ways.
  bool merge(Grammar::Rule inner, int64_t lo, int64_t hi) {
    auto it = repeats_.find(inner);
    if (it == repeats_.end() || it->second.lo > 1) return false;
    Repeat& r = it->second;
    int64_t merged_hi = -1;
    if (r.hi == 0 || hi == 0) {
      merged_hi = 0;
    } else if (r.hi > 0 && hi > 0) {
      if (r.hi > kMaxRepeat / hi) return false;
      merged_hi = r.hi * hi;
    }
    r.lo *= lo;
    r.hi = merged_hi;
    stand_in_for(inner);
    return true;
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  char32_t character() {
    const size_t start = i_;
    if (t_[i_] != '\\') {
      size_t pos = i_;
      const char32_t cp = next_code_point(t_, pos);
      i_ = pos;
      return cp;
    }
    if (i_ + 1 >= t_.size()) error(start, "a backslash at the end of the grammar");
    const char e = t_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
        return static_cast<unsigned char>(e);
      case 'x':
        return hex(2, start);
      case 'u':
        return hex(4, start);
      case 'U':
        return hex(8, start);
      default:
        error(start, fmt::format("unknown escape {} (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- "
                                 "\\xXX \\uXXXX \\UXXXXXXXX)",
                                 e > 0x20 && e < 0x7F ? fmt::format("'\\{}'", e)
                                                      : "'\\' before " + describe(i_ - 1)));
    }
  }

  char32_t hex(int digits, size_t start) {
    char32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = i_ < t_.size() ? t_[i_] : '\0';
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) error(start, fmt::format("the escape needs {} hex digits", digits));
      v = v * 16 + static_cast<char32_t>(d);
      ++i_;
    }
    if (v > 0x10FFFF)
      error(start,
            fmt::format("U+{:X} is past the last code point, U+10FFFF", static_cast<uint32_t>(v)));
    return v;
  }

  void literal(std::vector<Grammar::Item>& items) {
    const size_t open = i_++;
    for (;;) {
      if (i_ >= t_.size()) error(open, "a string literal with no closing '\"'");
      if (t_[i_] == '"') break;
      const size_t at_char = i_;
      const char32_t cp = character();
      if (cp >= 0xD800 && cp <= 0xDFFF)
        error(at_char, fmt::format("U+{:X} is a surrogate, which no UTF-8 text holds",
                                   static_cast<uint32_t>(cp)));
      std::string bytes;
      append_utf8(bytes, cp);
      for (char b : bytes) {
        ByteSet s;
        s.add(static_cast<uint8_t>(b));
        items.push_back(g_.bytes(s));
      }
    }
    ++i_;
  }

  Grammar::Item char_class() {
    const size_t open = i_++;
    const bool negated = at('^');
    if (negated) ++i_;
    CodePointRanges ranges;
    for (;;) {
      if (i_ >= t_.size()) error(open, "a character class with no closing ']'");
      if (t_[i_] == ']') break;
      const size_t at_lo = i_;
      const char32_t lo = character();
      char32_t hi = lo;
      if (at('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
        ++i_;
        hi = character();
        if (hi < lo)
          error(at_lo, fmt::format("the range U+{:04X}-U+{:04X} is out of order",
                                   static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)));
      }
      ranges.emplace_back(lo, hi);
    }
    ++i_;
    return cached_class(std::move(ranges), negated);
  }

  // Classes repeat (a JSON grammar's string character, `.`): each is compiled once.
  Grammar::Item cached_class(CodePointRanges ranges, bool negated) {
    auto key = std::make_pair(negated, std::move(ranges));
    if (auto it = classes_.find(key); it != classes_.end()) return it->second;
    const Grammar::Item item = code_point_class(g_, key.second, negated);
    classes_.emplace(std::move(key), item);
    return item;
  }

  // Each repeat as rules. A body that can match the empty string would let its empty matches
  // fill any count, in a number of ways that multiplies with each such repeat inside another
  // (built plainly, `(("a"?){0,5}){0,5}...` nested eight deep took the automaton 15 s to match
  // "aaaa", and `("a"?)+++...` a hundred deep failed it): such a body{lo,hi} is built as
  // nonempty(body){0,hi}, the same language with no empty match to repeat.
  void build_repeats() {
    nullable_ = g_.nullable_rules();
    for (const auto& [rule, r] : repeats_) {
      current_ = r.definition;
      g_.clear(rule);
      g_.add(rule, {Grammar::ref(nullable_[r.body] ? g_.repeat(nonempty(r.body), 0, r.hi)
                                                   : g_.repeat(r.body, r.lo, r.hi))});
      owner_.resize(g_.rule_count(), current_);
    }
    fill_nonempty();
    current_ = kNowhere;
  }

  // A rule that matches what `rule` matches but the empty string: made here, its alternatives
  // written by fill_nonempty (so that a long chain of rules costs no deep recursion).
  Grammar::Rule nonempty(Grammar::Rule rule) {
    if (rule >= nullable_.size() || !nullable_[rule]) return rule;
    auto [it, fresh] = nonempty_.try_emplace(rule, 0);
    if (fresh) {
      it->second = g_.new_rule();
      unfilled_.push_back(rule);
    }
    return it->second;
  }

  // Each alternative of a nullable rule gives one alternative per item that may be its first
  // non-empty one: that item's non-empty rule, then the items after it as they are. A nullable
  // repeat, read from its record (its own rules may not be built yet), gives one or more
  // non-empty matches of its body, up to its bound.
  void fill_nonempty() {
    while (!unfilled_.empty()) {
      const Grammar::Rule rule = unfilled_.back();
      unfilled_.pop_back();
      const Grammar::Rule out = nonempty_.at(rule);
      // Its rules belong to the rule it matches all but the empty string of.
      const size_t owner = owner_.at(rule);
      owner_.resize(g_.rule_count(), owner);
      owner_[out] = owner;
      if (auto it = repeats_.find(rule); it != repeats_.end()) {
        const Repeat r = it->second;
        if (r.hi != 0) g_.add(out, {Grammar::ref(g_.repeat(nonempty(r.body), 1, r.hi))});
        owner_.resize(g_.rule_count(), owner);
        continue;
      }
      const std::vector<std::vector<Grammar::Item>> alternatives = g_.alternatives(rule);
      for (const std::vector<Grammar::Item>& alt : alternatives)
        for (size_t k = 0; k < alt.size(); ++k) {
          std::vector<Grammar::Item> items{alt[k].is_rule ? Grammar::ref(nonempty(alt[k].value))
                                                          : alt[k]};
          items.insert(items.end(), alt.begin() + static_cast<ptrdiff_t>(k) + 1, alt.end());
          g_.add(out, std::move(items));
          if (!alt[k].is_rule || !nullable_[alt[k].value]) break;
        }
      owner_.resize(g_.rule_count(), owner);
    }
  }

  void check_whole() {
    const NamedRule* missing = nullptr;
    for (const NamedRule& d : defs_)
      if (d.defined_at == kNowhere && (missing == nullptr || d.first_use < missing->first_use))
        missing = &d;
    if (missing != nullptr) {
      current_ = missing->first_user;
      error(missing->first_use, fmt::format("rule '{}' is used but never defined", missing->name));
    }
    const auto root = index_.find("root");
    if (root == index_.end())
      fail(ErrorKind::kInvalidInput,
           "the grammar has no 'root' rule (the rule the whole output must match)");
    g_.set_root(defs_[root->second].rule);
    owner_.resize(g_.rule_count(), kNowhere);
    build_repeats();
    if (const std::optional<Grammar::Rule> r = g_.left_recursive_rule()) {
      current_ = owner_.at(*r);  // every rule is made for some definition
      const NamedRule& d = defs_.at(current_);
      error(d.defined_at,
            fmt::format("rule '{}' is left-recursive: it can reach itself before matching any "
                        "character, and strata's grammars cannot run left recursion; write the "
                        "repetition with * or + instead (list ::= item (\",\" item)*, not "
                        "list ::= list \",\" item | item)",
                        d.name),
            ErrorKind::kUnsupported);
    }
  }

  struct Repeat {  // body{lo,hi} (hi < 0: no bound), built once all rules are read
    Grammar::Rule body;
    int64_t lo, hi;
    size_t definition;  // the defs_ index of the rule it is in
  };

  std::string_view t_;
  size_t i_ = 0;
  Grammar g_;
  std::vector<NamedRule> defs_;
  std::unordered_map<std::string, size_t> index_;  // name -> defs_ index
  std::vector<size_t> owner_;  // per grammar rule: the defs_ index of the rule it was made for
  size_t current_ = kNowhere;  // the definition being read
  std::map<std::pair<bool, CodePointRanges>, Grammar::Item> classes_;
  std::map<Grammar::Rule, Repeat> repeats_;                    // by the rule that stands for it
  std::vector<bool> nullable_;                                 // per rule, once all rules are read
  std::unordered_map<Grammar::Rule, Grammar::Rule> nonempty_;  // nonempty()'s rules
  std::vector<Grammar::Rule> unfilled_;  // rules whose nonempty() rule has no alternatives yet
};

}  // namespace

Grammar compile_gbnf(std::string_view text) { return GbnfCompiler(text).compile(); }

}  // namespace strata::text::structured
