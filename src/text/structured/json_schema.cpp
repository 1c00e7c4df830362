// JSON Schema -> byte grammar. One Compiler per schema: rules are memoized per (schema node, $ref
// depth left), so a $def used many times is compiled once per depth, and recursion ends when the
// depth runs out (a branch that would need more matches nothing).
#include "text/structured/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/structured/regex_grammar.h"

namespace strata::text::structured {

namespace {

using OJ = nlohmann::ordered_json;
using Rule = Grammar::Rule;

constexpr int64_t kMaxCount = 4096;         // the largest minItems/maxItems/min-maxLength
constexpr int64_t kMaxInteger = 999'999'999'999'999;  // integers take at most 15 digits

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description", "default",   "examples", "$schema", "$id",       "$comment",
    "deprecated", "readOnly",  "writeOnly", "$defs",    "definitions", "$anchor", "example"};
const std::set<std::string, std::less<>> kKeywords = {
    "type",      "enum",     "const",     "properties", "required",   "additionalProperties",
    "items",     "minItems", "maxItems",  "anyOf",      "oneOf",      "allOf",
    "$ref",      "minLength", "maxLength", "pattern",   "format",     "minimum",
    "maximum",   "exclusiveMinimum",      "exclusiveMaximum",       "nullable"};

// The patterns of the supported formats, as regexes over the characters of the string.
std::optional<std::string> format_pattern(std::string_view format) {
  const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  const std::string time =
      R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
  const std::string octet = R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  const std::string label = R"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";
  if (format == "date") return date;
  if (format == "time") return time;
  if (format == "date-time") return date + "T" + time;
  if (format == "uuid")
    return R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
  if (format == "email")
    return R"([A-Za-z0-9_%+-]{1,32}(\.[A-Za-z0-9_%+-]{1,32}){0,3}@)" + label + R"((\.)" + label +
           R"(){0,3}\.[A-Za-z]{2,12})";
  if (format == "hostname") return label + R"((\.)" + label + R"(){0,7})";
  if (format == "ipv4") return "(" + octet + R"(\.){3})" + octet;
  if (format == "uri")
    return R"([A-Za-z][A-Za-z0-9+.-]{0,15}:[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]{1,512})";
  return std::nullopt;
}

std::string dump(const OJ& v) { return v.dump(-1, ' ', false, OJ::error_handler_t::strict); }

class Compiler {
 public:
  Compiler(Grammar& g, const OJ& root, const JsonSchemaOptions& o) : g_(g), root_(root), o_(o) {
    ws_ = json_whitespace(g_, o_);
    char_ = json_string_char(g_);
  }

  Rule ws() const { return ws_; }

  Rule value(const OJ& s, const std::string& path, int depth) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return any(o_.any_depth);
      fail(ErrorKind::kUnsupported, "the schema at '{}' is false: no value is valid", path);
    }
    check(s.is_object(), ErrorKind::kInvalidInput,
          "the schema at '{}' must be an object or a boolean", path);
    const auto key = std::make_pair(&s, depth);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const Rule r = build(s, path, depth);
    memo_[key] = r;
    return r;
  }

  // Any JSON value nested at most `depth` levels.
  Rule any(int depth) {
    if (auto it = any_memo_.find(depth); it != any_memo_.end()) return it->second;
    std::vector<Rule> alts = {string_rule(0, -1), number_rule(std::nullopt, std::nullopt),
                              g_.literal("true"), g_.literal("false"), g_.literal("null")};
    if (depth > 0) {
      const Rule inner = any(depth - 1);
      alts.push_back(free_object(inner));
      alts.push_back(array_of(inner, 0, -1));
    }
    const Rule r = g_.choice(alts);
    any_memo_[depth] = r;
    return r;
  }

  Rule free_object(Rule member_value) {
    const Rule member =
        g_.sequence({ref(string_rule(0, -1)), ref(ws_), lit(":"), ref(ws_), ref(member_value)});
    const Rule more = g_.repeat(g_.sequence({ref(ws_), lit(","), ref(ws_), ref(member)}), 0, -1);
    const Rule body = g_.choice({g_.sequence({ref(member), ref(more)}), g_.empty()});
    return g_.sequence({lit("{"), ref(ws_), ref(body), ref(ws_), lit("}")});
  }

 private:
  static Grammar::Item ref(Rule r) { return Grammar::ref(r); }
  Grammar::Item lit(std::string_view s) { return ref(g_.literal(s)); }

  // A rule matching exactly one of `texts`, as a trie (so its states stay few).
  Rule literal_set(std::vector<std::string> texts) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    return trie(texts, 0, texts.size(), 0);
  }
  Rule trie(const std::vector<std::string>& t, size_t begin, size_t end, size_t at) {
    const Rule r = g_.new_rule();
    size_t i = begin;
    if (i < end && t[i].size() == at) {
      g_.add(r, {});
      ++i;
    }
    while (i < end) {
      size_t j = i;
      while (j < end && t[j][at] == t[i][at]) ++j;
      ByteSet b;
      b.add(static_cast<uint8_t>(t[i][at]));
      g_.add(r, {g_.bytes(b), ref(trie(t, i, j, at + 1))});
      i = j;
    }
    return r;
  }

  void check_keywords(const OJ& s, const std::string& path) {
    std::vector<std::string> unknown;
    for (const auto& [k, v] : s.items())
      if (!kKeywords.contains(k) && !kAnnotations.contains(k)) unknown.push_back("'" + k + "'");
    if (!unknown.empty())
      fail(ErrorKind::kUnsupported, "unsupported JSON Schema keyword{} {} at '{}'",
           unknown.size() > 1 ? "s" : "", fmt::join(unknown, ", "), path);
  }

  // Keywords other than annotations and `except`.
  static bool has_constraints_besides(const OJ& s, std::initializer_list<std::string_view> except) {
    for (const auto& [k, v] : s.items())
      if (kKeywords.contains(k) && std::find(except.begin(), except.end(), k) == except.end())
        return true;
    return false;
  }

  const OJ& resolve(const std::string& ref, const std::string& path) {
    check(!ref.empty() && ref[0] == '#', ErrorKind::kUnsupported,
          "'$ref' '{}' at '{}': only references inside the schema (starting with '#') are "
          "supported",
          ref, path);
    try {
      const OJ& target = root_.at(OJ::json_pointer(ref.substr(1)));
      return target;
    } catch (const std::exception&) {
      fail(ErrorKind::kInvalidInput, "'$ref' '{}' at '{}' names nothing in the schema", ref, path);
    }
  }

  std::optional<double> number_of(const OJ& s, const char* key, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    check(it->is_number(), ErrorKind::kInvalidInput, "'{}' at '{}' must be a number", key, path);
    return it->get<double>();
  }
  int64_t count_of(const OJ& s, const char* key, int64_t fallback, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end()) return fallback;
    check(it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0),
          ErrorKind::kInvalidInput, "'{}' at '{}' must be a non-negative integer", key, path);
    const int64_t v = it->get<int64_t>();
    check(v <= kMaxCount, ErrorKind::kUnsupported, "'{}' at '{}' is over {}, the largest supported",
          key, path, kMaxCount);
    return v;
  }

  Rule build(const OJ& s, const std::string& path, int depth) {
    check_keywords(s, path);
    if (auto it = s.find("$ref"); it != s.end()) {
      check(it->is_string(), ErrorKind::kInvalidInput, "'$ref' at '{}' must be a string", path);
      if (has_constraints_besides(s, {"$ref"}))
        fail(ErrorKind::kUnsupported, "'$ref' beside other keywords at '{}' is not supported",
             path);
      if (depth == 0) return g_.new_rule();  // recursion cut: this branch matches nothing
      const std::string target = it->get<std::string>();
      return value(resolve(target, path), target, depth - 1);
    }
    if (auto it = s.find("enum"); it != s.end()) {
      check(it->is_array() && !it->empty(), ErrorKind::kInvalidInput,
            "'enum' at '{}' must be a non-empty array", path);
      std::vector<std::string> texts;
      for (const OJ& v : *it) texts.push_back(dump(v));
      return literal_set(std::move(texts));
    }
    if (auto it = s.find("const"); it != s.end()) return g_.literal(dump(*it));
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      check(it->is_array() && !it->empty(), ErrorKind::kInvalidInput,
            "'{}' at '{}' must be a non-empty array", key, path);
      if (has_constraints_besides(s, {key}))
        fail(ErrorKind::kUnsupported, "'{}' beside other keywords at '{}' is not supported", key,
             path);
      if (std::string_view(key) == "allOf") {
        check(it->size() == 1, ErrorKind::kUnsupported,
              "'allOf' of more than one schema at '{}' is not supported", path);
        return value((*it)[0], path + "/allOf/0", depth);
      }
      std::vector<Rule> alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts.push_back(value((*it)[i], fmt::format("{}/{}/{}", path, key, i), depth));
      return g_.choice(alts);
    }
    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const OJ& t : *it) {
          check(t.is_string(), ErrorKind::kInvalidInput, "'type' at '{}' lists a non-string",
                path);
          types.push_back(t.get<std::string>());
        }
      } else {
        fail(ErrorKind::kInvalidInput, "'type' at '{}' must be a string or a list of strings",
             path);
      }
    } else if (s.contains("properties") || s.contains("required") ||
               s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") ||
               s.contains("format")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return s.value("nullable", false) ? g_.choice({any(o_.any_depth), g_.literal("null")})
                                        : any(o_.any_depth);
    }
    if (s.value("nullable", false)) types.push_back("null");
    std::vector<Rule> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, path, depth));
    return alts.size() == 1 ? alts[0] : g_.choice(alts);
  }

  Rule typed(const OJ& s, const std::string& type, const std::string& path, int depth) {
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "integer" || type == "number") return number(s, type == "integer", path);
    if (type == "boolean") return g_.choice({g_.literal("true"), g_.literal("false")});
    if (type == "null") return g_.literal("null");
    fail(ErrorKind::kInvalidInput, "unknown type '{}' at '{}'", type, path);
  }

  Rule object(const OJ& s, const std::string& path, int depth) {
    const OJ* props = nullptr;
    if (auto it = s.find("properties"); it != s.end()) {
      check(it->is_object(), ErrorKind::kInvalidInput, "'properties' at '{}' must be an object",
            path);
      props = &*it;
    }
    std::vector<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      check(it->is_array(), ErrorKind::kInvalidInput, "'required' at '{}' must be an array",
            path);
      for (const OJ& r : *it) {
        check(r.is_string(), ErrorKind::kInvalidInput, "'required' at '{}' lists a non-string",
              path);
        required.push_back(r.get<std::string>());
      }
    }
    const OJ* extra = nullptr;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      check(it->is_boolean() || it->is_object(), ErrorKind::kInvalidInput,
            "'additionalProperties' at '{}' must be a boolean or a schema", path);
      extra = &*it;
    }
    if (props == nullptr && required.empty()) {
      if (extra != nullptr && extra->is_boolean() && !extra->get<bool>())
        return g_.sequence({lit("{"), ref(ws_), lit("}")});
      const Rule v = extra != nullptr && extra->is_object()
                         ? value(*extra, path + "/additionalProperties", depth)
                         : any(o_.any_depth - 1);
      return free_object(v);
    }
    // Properties in the schema's order, then required ones it does not describe.
    struct Property {
      std::string name;
      const OJ* schema;
      bool required;
    };
    static const OJ kAny = true;
    std::vector<Property> list;
    if (props != nullptr)
      for (const auto& [name, sub] : props->items())
        list.push_back({name, &sub,
                        std::find(required.begin(), required.end(), name) != required.end()});
    for (const std::string& r : required)
      if (props == nullptr || !props->contains(r)) list.push_back({r, &kAny, true});
    // after[i][e]: the members from i on, e: whether one was written already (a comma first).
    const size_t n = list.size();
    std::vector<std::array<Rule, 2>> after(n + 1);
    after[n] = {g_.empty(), g_.empty()};
    const Rule comma = g_.sequence({ref(ws_), lit(","), ref(ws_)});
    for (size_t i = n; i-- > 0;) {
      const Property& p = list[i];
      const Rule member =
          g_.sequence({lit(dump(OJ(p.name))), ref(ws_), lit(":"), ref(ws_),
                       ref(value(*p.schema, path + "/properties/" + p.name, depth))});
      for (int e = 0; e < 2; ++e) {
        const Rule r = g_.new_rule();
        if (e == 1)
          g_.add(r, {ref(comma), ref(member), ref(after[i + 1][1])});
        else
          g_.add(r, {ref(member), ref(after[i + 1][1])});
        if (!p.required) g_.add(r, {ref(after[i + 1][e])});
        after[i][e] = r;
      }
    }
    return g_.sequence({lit("{"), ref(ws_), ref(after[0][0]), ref(ws_), lit("}")});
  }

  Rule array_of(Rule item, int64_t min, int64_t max) {
    if (max == 0) return g_.sequence({lit("["), ref(ws_), lit("]")});
    const Rule next = g_.sequence({ref(ws_), lit(","), ref(ws_), ref(item)});
    const Rule more = g_.repeat(next, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1);
    Rule body = g_.sequence({ref(item), ref(more)});
    if (min == 0) body = g_.choice({body, g_.empty()});
    return g_.sequence({lit("["), ref(ws_), ref(body), ref(ws_), lit("]")});
  }

  Rule array(const OJ& s, const std::string& path, int depth) {
    const int64_t min = count_of(s, "minItems", 0, path);
    const int64_t max = count_of(s, "maxItems", -1, path);
    check(max < 0 || max >= min, ErrorKind::kInvalidInput,
          "'maxItems' is below 'minItems' at '{}'", path);
    auto it = s.find("items");
    if (it != s.end() && it->is_array())
      fail(ErrorKind::kUnsupported, "'items' as a list (a tuple) at '{}' is not supported", path);
    const Rule item =
        it != s.end() ? value(*it, path + "/items", depth) : any(o_.any_depth - 1);
    return array_of(item, min, max);
  }

  Rule string_rule(int64_t min, int64_t max) {
    return g_.sequence({lit("\""), ref(g_.repeat(char_, min, max)), lit("\"")});
  }

  Rule string(const OJ& s, const std::string& path) {
    const int64_t min = count_of(s, "minLength", 0, path);
    const int64_t max = count_of(s, "maxLength", -1, path);
    check(max < 0 || max >= min, ErrorKind::kInvalidInput,
          "'maxLength' is below 'minLength' at '{}'", path);
    std::optional<std::string> pattern;
    if (auto it = s.find("pattern"); it != s.end()) {
      check(it->is_string(), ErrorKind::kInvalidInput, "'pattern' at '{}' must be a string", path);
      pattern = it->get<std::string>();
    } else if (auto f = s.find("format"); f != s.end()) {
      check(f->is_string(), ErrorKind::kInvalidInput, "'format' at '{}' must be a string", path);
      pattern = format_pattern(f->get<std::string>());
      if (!pattern)
        fail(ErrorKind::kUnsupported,
             "format '{}' at '{}' is not supported (supported: date-time, date, time, email, "
             "uuid, uri, ipv4, hostname)",
             f->get<std::string>(), path);
    }
    if (!pattern) return string_rule(min, max);
    if (s.contains("minLength") || s.contains("maxLength"))
      fail(ErrorKind::kUnsupported,
           "'minLength' or 'maxLength' beside 'pattern' or 'format' at '{}' is not supported",
           path);
    try {
      return g_.sequence(
          {lit("\""), ref(compile_regex(g_, *pattern, RegexMode::kJsonString)), lit("\"")});
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{} (at '{}')", e.what(), path));
    }
  }

  // Decimal texts of the integers from lo to hi, both non-negative and of `digits` digits
  // (leading zeros allowed only as the range's own digits).
  Rule digits_between(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return g_.empty();
    ByteSet any_digit;
    any_digit.add_range('0', '9');
    if (lo.find_first_not_of('0') == std::string::npos &&
        hi.find_first_not_of('9') == std::string::npos)
      return g_.repeat(g_.sequence({g_.bytes(any_digit)}), static_cast<int64_t>(lo.size()),
                       static_cast<int64_t>(lo.size()));
    if (lo.front() == hi.front())
      return g_.sequence({lit(lo.substr(0, 1)), ref(digits_between(lo.substr(1), hi.substr(1)))});
    const std::string nines(lo.size() - 1, '9'), zeros(lo.size() - 1, '0');
    const Rule r = g_.new_rule();
    g_.add(r, {lit(lo.substr(0, 1)), ref(digits_between(lo.substr(1), nines))});
    if (hi.front() - lo.front() > 1) {
      ByteSet mid;
      mid.add_range(static_cast<uint8_t>(lo.front() + 1), static_cast<uint8_t>(hi.front() - 1));
      g_.add(r, {g_.bytes(mid), ref(g_.repeat(g_.sequence({g_.bytes(any_digit)}),
                                               static_cast<int64_t>(lo.size() - 1),
                                               static_cast<int64_t>(lo.size() - 1)))});
    }
    g_.add(r, {lit(hi.substr(0, 1)), ref(digits_between(zeros, hi.substr(1)))});
    return r;
  }

  // Decimal texts of the non-negative integers from lo to hi (no leading zeros).
  Rule naturals(int64_t lo, int64_t hi) {
    std::vector<Rule> alts;
    int64_t low = 0, high = 9;  // the integers of each length
    for (int len = 1; len <= 16 && low <= hi; ++len) {
      const int64_t a = std::max(lo, low), b = std::min(hi, high);
      if (a <= b) {
        const std::string sa = std::to_string(a), sb = std::to_string(b);
        alts.push_back(digits_between(sa, sb));
      }
      low = high + 1;
      high = high * 10 + 9;
    }
    return alts.size() == 1 ? alts[0] : g_.choice(alts);
  }

  // Decimal texts of the integers from lo to hi.
  Rule integers(int64_t lo, int64_t hi) {
    std::vector<Rule> alts;
    if (lo < 0) {
      const Rule neg = naturals(std::max<int64_t>(1, -hi), -lo);
      alts.push_back(g_.sequence({lit("-"), ref(neg)}));
    }
    if (hi >= 0) alts.push_back(naturals(std::max<int64_t>(lo, 0), hi));
    return alts.size() == 1 ? alts[0] : g_.choice(alts);
  }

  Rule fraction() {
    ByteSet digit;
    digit.add_range('0', '9');
    return g_.sequence({lit("."), ref(g_.repeat(g_.sequence({g_.bytes(digit)}), 1, 15))});
  }

  Rule number_rule(std::optional<double> lo, std::optional<double> hi) {
    if (!lo && !hi && any_number_) return *any_number_;
    if (!lo && !hi) {  // any number: an exponent too
      ByteSet digit, sign, e;
      digit.add_range('0', '9');
      sign.add('+');
      sign.add('-');
      e.add('e');
      e.add('E');
      const Rule exponent = g_.sequence(
          {g_.bytes(e), ref(g_.repeat(g_.sequence({g_.bytes(sign)}), 0, 1)),
           ref(g_.repeat(g_.sequence({g_.bytes(digit)}), 1, 3))});
      any_number_ = g_.sequence({ref(integers(-kMaxInteger, kMaxInteger)),
                                 ref(g_.repeat(fraction(), 0, 1)), ref(g_.repeat(exponent, 0, 1))});
      return *any_number_;
    }
    // Bounded: an integer in range, or i.frac for a whole i with [i, i + 1] in range (so also
    // -i.frac with [-i - 1, -i] in range), no exponent.
    const int64_t ilo = lo ? static_cast<int64_t>(std::ceil(*lo)) : -kMaxInteger;
    const int64_t ihi = hi ? static_cast<int64_t>(std::floor(*hi)) : kMaxInteger;
    check(ilo <= ihi, ErrorKind::kUnsupported, "no number lies between the bounds");
    std::vector<Rule> alts = {integers(ilo, ihi)};
    const int64_t plo = std::max<int64_t>(ilo, 0), phi = ihi - 1;
    if (plo <= phi) alts.push_back(g_.sequence({ref(naturals(plo, phi)), ref(fraction())}));
    const int64_t nlo = std::max<int64_t>(1, -ihi), nhi = -ilo - 1;
    if (nlo <= nhi)
      alts.push_back(g_.sequence({lit("-"), ref(naturals(nlo, nhi)), ref(fraction())}));
    return alts.size() == 1 ? alts[0] : g_.choice(alts);
  }

  Rule number(const OJ& s, bool integer, const std::string& path) {
    std::optional<double> lo = number_of(s, "minimum", path);
    std::optional<double> hi = number_of(s, "maximum", path);
    const std::optional<double> xlo = number_of(s, "exclusiveMinimum", path);
    const std::optional<double> xhi = number_of(s, "exclusiveMaximum", path);
    if (xlo) lo = std::max(lo.value_or(*xlo), std::floor(*xlo) + 1);
    if (xhi) hi = std::min(hi.value_or(*xhi), std::ceil(*xhi) - 1);
    const double limit = static_cast<double>(kMaxInteger);
    if (lo) lo = std::clamp(*lo, -limit, limit);
    if (hi) hi = std::clamp(*hi, -limit, limit);
    if (lo && hi && *lo > *hi)
      fail(ErrorKind::kInvalidInput, "the bounds at '{}' leave no value", path);
    if (!integer) {
      // A bounded non-integer range is matched by its whole part: exclusive bounds were already
      // cut to the whole numbers inside them.
      try {
        return number_rule(lo, hi);
      } catch (const Error& e) {
        throw Error(e.kind(), fmt::format("{} at '{}'", e.what(), path));
      }
    }
    const int64_t ilo = lo ? static_cast<int64_t>(std::ceil(*lo)) : -kMaxInteger;
    const int64_t ihi = hi ? static_cast<int64_t>(std::floor(*hi)) : kMaxInteger;
    check(ilo <= ihi, ErrorKind::kInvalidInput, "no integer lies between the bounds at '{}'",
          path);
    return integers(ilo, ihi);
  }

  Grammar& g_;
  const OJ& root_;
  const JsonSchemaOptions& o_;
  Rule ws_ = 0, char_ = 0;
  std::map<std::pair<const OJ*, int>, Rule> memo_;
  std::map<int, Rule> any_memo_;
  std::optional<Rule> any_number_;
};

}  // namespace

Grammar::Rule json_whitespace(Grammar& grammar, const JsonSchemaOptions& options) {
  ByteSet space, blank;
  for (char c : std::string_view(" \t\n\r")) space.add(static_cast<uint8_t>(c));
  blank.add(' ');
  blank.add('\t');
  const Grammar::Rule any =
      grammar.repeat(grammar.sequence({grammar.bytes(space)}), 0, options.max_whitespace);
  if (options.max_indent <= 0) return any;
  const Grammar::Rule blanks = grammar.sequence({grammar.bytes(blank)});
  const Grammar::Rule line_break =
      grammar.choice({grammar.literal("\n"), grammar.literal("\r\n")});
  const Grammar::Rule indented =
      grammar.sequence({Grammar::ref(grammar.repeat(blanks, 0, options.max_whitespace)),
                        Grammar::ref(line_break),
                        Grammar::ref(grammar.repeat(blanks, 0, options.max_indent))});
  return grammar.choice({any, indented});
}

Grammar::Rule add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema,
                              const nlohmann::ordered_json& root, const JsonSchemaOptions& options) {
  Compiler c(grammar, root, options);
  return c.value(schema, "#", options.ref_depth);
}

Grammar compile_json_schema(const nlohmann::ordered_json& schema,
                            const JsonSchemaOptions& options) {
  Grammar g;
  Compiler c(g, schema, options);
  const Grammar::Rule v = c.value(schema, "#", options.ref_depth);
  g.set_root(g.sequence({Grammar::ref(c.ws()), Grammar::ref(v), Grammar::ref(c.ws())}));
  return g;
}

Grammar any_json_object(const JsonSchemaOptions& options) {
  Grammar g;
  const nlohmann::ordered_json root = nlohmann::ordered_json::object();
  Compiler c(g, root, options);
  const Grammar::Rule v = c.free_object(c.any(options.any_depth - 1));
  g.set_root(g.sequence({Grammar::ref(c.ws()), Grammar::ref(v), Grammar::ref(c.ws())}));
  return g;
}

}  // namespace strata::text::structured
