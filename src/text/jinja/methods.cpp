// Python methods of str (and Markup), list, tuple and dict as templates call them
// (`s.split(',')`, `d.get('k')`, `'{}'.format(x)`), including str.format's mini-language.
// The immutable sandbox's ban on mutating methods is enforced by the interpreter.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "text/jinja/interpreter.h"
#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

constexpr std::array<std::string_view, 40> kStrMethods = {
    "capitalize",   "casefold",     "center",    "count",       "endswith",   "find",
    "format",       "index",        "isalnum",   "isalpha",     "isascii",    "isdecimal",
    "isdigit",      "islower",      "isnumeric", "isprintable", "isspace",    "istitle",
    "isupper",      "join",         "ljust",     "lower",       "lstrip",     "partition",
    "removeprefix", "removesuffix", "replace",   "rfind",       "rindex",     "rjust",
    "rpartition",   "rsplit",       "rstrip",    "split",       "splitlines", "startswith",
    "strip",        "swapcase",     "title",     "upper"};
constexpr std::array<std::string_view, 1> kStrMethodsMore = {"zfill"};
constexpr std::array<std::string_view, 11> kListMethods = {"append", "clear",   "copy",   "count",
                                                           "extend", "index",   "insert", "pop",
                                                           "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 10> kDictMethods = {
    "clear", "copy", "get", "items", "keys", "pop", "popitem", "setdefault", "update", "values"};

template <size_t N>
bool in(const std::array<std::string_view, N>& set, std::string_view name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override {
    return fmt::format("<built-in method {} of {} object>", name_, jinja::type_name(self_));
  }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override {
    return call_method(interp, self_, name_, args);
  }
  void drain(std::vector<Value>& out) override { out.push_back(std::move(self_)); }

 private:
  Value self_;
  std::string name_;
};

const std::string& str_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    if (v.is_undefined()) v.fail_undefined();
    raise("TypeError", fmt::format("{} must be str, not {}", what, type_name(v)));
  }
  return v.str();
}

std::optional<int64_t> opt_index(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  return int_arg(*v, "slice index");
}

std::optional<std::string_view> opt_chars(const std::optional<Value>& v, std::string_view what) {
  if (!v || v->is_none()) return std::nullopt;
  return std::string_view(str_arg(*v, what));
}

Value string_list(Interpreter& interp, const std::vector<std::string>& parts, bool markup) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(Value::string(p, markup));
  interp.charge(out.size());
  return Value::new_list(std::move(out));
}

// startswith/endswith: prefix may be a str or a tuple of str.
bool affix_match(const std::string& s, const Value& affix, std::optional<int64_t> start,
                 std::optional<int64_t> end, bool prefix, std::string_view method) {
  std::vector<std::string_view> options;
  if (affix.is_string()) {
    options.push_back(affix.str());
  } else if (affix.is_tuple()) {
    for (const Value& v : affix.list().items) {
      if (!v.is_string()) {
        raise("TypeError",
              fmt::format("tuple for {} must only contain str, not {}", method, type_name(v)));
      }
      options.push_back(v.str());
    }
  } else {
    if (affix.is_undefined()) affix.fail_undefined();
    raise("TypeError", fmt::format("{} first arg must be str or a tuple of str, not {}", method,
                                   type_name(affix)));
  }
  std::string window = s;
  if (start || end) {
    std::u32string cps = py::decode(s);
    auto n = static_cast<int64_t>(cps.size());
    int64_t lo = start ? py::clamp_index(*start, n) : 0;
    int64_t hi = end ? py::clamp_index(*end, n) : n;
    if (start && *start > n) return false;
    window = lo <= hi ? py::encode(std::u32string_view(cps).substr(lo, hi - lo)) : std::string();
  }
  for (std::string_view o : options) {
    if (o.size() > window.size()) continue;
    if (prefix ? window.compare(0, o.size(), o) == 0
               : window.compare(window.size() - o.size(), o.size(), o) == 0) {
      return true;
    }
  }
  return false;
}

std::string pad(const std::string& s, int64_t width, char32_t fill, char align) {
  auto len = static_cast<int64_t>(py::length(s));
  if (width <= len) return s;
  int64_t total = width - len;
  // '^' is format()'s centering (extra fill on the right); 'c' is str.center's, which puts the
  // extra fill on the left when the width is odd.
  int64_t left = align == '<' ? 0 : align == '>' ? total : total / 2;
  if (align == 'c') left = total / 2 + (total & width & 1);
  std::string fill_str;
  py::append_utf8(fill_str, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill_str;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill_str;
  return out;
}

char32_t fill_char(const std::optional<Value>& v) {
  if (!v) return ' ';
  std::u32string cps = py::decode(str_arg(*v, "fill character"));
  if (cps.size() != 1) raise("TypeError", "The fill character must be exactly one character long");
  return cps[0];
}

Value str_method(Interpreter& interp, const Value& self, std::string_view name, CallArgs& args) {
  const std::string& s = self.str();
  const bool markup = self.is_markup();
  auto result = [&](std::string out) { return interp.make_string(std::move(out), markup); };
  // Markup (markupsafe 3) escapes replace's replacement, fill characters and joined items.
  auto escaped_arg = [&](const std::optional<Value>& v, std::string_view what) -> std::string {
    const std::string& a = str_arg(*v, what);
    return markup && !v->is_markup() ? escape_html(a) : a;
  };
  if (name == "upper") return result(py::upper(s));
  if (name == "lower" || name == "casefold") return result(py::lower(s));
  if (name == "title") return result(py::title(s));
  if (name == "capitalize") return result(py::capitalize(s));
  if (name == "swapcase") return result(py::swapcase(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind_args(name, args, {"chars"});
    auto chars = opt_chars(a[0], "chars");
    return result(py::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind_args(name, args, {"sep", "maxsplit"});
    auto sep = opt_chars(a[0], "sep");
    if (sep && sep->empty()) raise("ValueError", "empty separator");
    int64_t maxsplit = a[1] ? int_arg(*a[1], "maxsplit") : -1;
    auto parts = name == "split" ? py::split(s, sep, maxsplit) : py::rsplit(s, sep, maxsplit);
    return string_list(interp, parts, markup);
  }
  if (name == "splitlines") {
    auto a = bind_args(name, args, {"keepends"});
    return string_list(interp, py::splitlines(s, a[0] && truthy(*a[0])), markup);
  }
  if (name == "startswith" || name == "endswith") {
    auto a = bind_args(name, args, {"prefix", "start", "end"});
    if (!a[0]) raise("TypeError", fmt::format("{}() takes at least 1 argument (0 given)", name));
    return Value::boolean(
        affix_match(s, *a[0], opt_index(a[1]), opt_index(a[2]), name == "startswith", name));
  }
  if (name == "replace") {
    auto a = bind_args(name, args, {"old", "new", "count"});
    if (!a[0] || !a[1]) raise("TypeError", "replace expected at least 2 arguments");
    int64_t count = a[2] ? int_arg(*a[2], "count") : -1;
    std::string old = str_arg(*a[0], "replace() argument 1");
    std::string repl = escaped_arg(a[1], "replace() argument 2");
    if (!repl.empty()) {
      size_t hits =
          old.empty() ? py::length(s) + 1 : static_cast<size_t>(py::count(s, old, {}, {}));
      interp.check_size(s.size() + hits * repl.size());
    }
    return result(py::replace(s, old, repl, count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto a = bind_args(name, args, {"sub", "start", "end"});
    if (!a[0]) raise("TypeError", fmt::format("{}() takes at least 1 argument (0 given)", name));
    const std::string& sub = str_arg(*a[0], "substring");
    if (name == "count") return Value::integer(py::count(s, sub, opt_index(a[1]), opt_index(a[2])));
    bool reverse = name[0] == 'r';
    int64_t at = py::find(s, sub, opt_index(a[1]), opt_index(a[2]), reverse);
    if (at < 0 && (name == "index" || name == "rindex")) raise("ValueError", "substring not found");
    return Value::integer(at);
  }
  if (name == "join") {
    auto a = bind_args(name, args, {"iterable"});
    if (!a[0]) raise("TypeError", "join() takes exactly one argument (0 given)");
    std::vector<Value> items = iterate(*a[0]);
    interp.charge(items.size());
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        raise("TypeError", fmt::format("sequence item {}: expected str instance, {} found", i,
                                       type_name(items[i])));
      }
      if (i > 0) out += s;
      out += markup && !items[i].is_markup() ? escape_html(items[i].str()) : items[i].str();
      interp.check_size(out.size());
    }
    return result(std::move(out));
  }
  if (name == "format") return result(str_format(interp, s, args, markup));
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto a = bind_args(name, args, {"width", "fillchar"});
    if (!a[0]) raise("TypeError", fmt::format("{}() takes at least 1 argument (0 given)", name));
    int64_t width = int_arg(*a[0], "width");
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    char align = name == "center" ? 'c' : name == "ljust" ? '<' : '>';
    std::optional<Value> fill = a[1];
    if (fill && markup) fill = Value::string(escaped_arg(fill, "fill character"));
    return result(pad(s, width, fill_char(fill), align));
  }
  if (name == "zfill") {
    auto a = bind_args(name, args, {"width"});
    if (!a[0]) raise("TypeError", "zfill() takes exactly one argument (0 given)");
    int64_t width = int_arg(*a[0], "width");
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    auto len = static_cast<int64_t>(py::length(s));
    if (width <= len) return result(s);
    std::string zeros(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-'))
      return result(s.substr(0, 1) + zeros + s.substr(1));
    return result(zeros + s);
  }
  if (name == "partition" || name == "rpartition") {
    auto a = bind_args(name, args, {"sep"});
    if (!a[0]) raise("TypeError", fmt::format("{}() takes exactly one argument (0 given)", name));
    std::string sep = str_arg(*a[0], "sep");
    if (sep.empty()) raise("ValueError", "empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (at == std::string::npos) {
      parts = name == "partition"
                  ? std::vector<Value>{Value::string(s, markup), Value::string("", markup),
                                       Value::string("", markup)}
                  : std::vector<Value>{Value::string("", markup), Value::string("", markup),
                                       Value::string(s, markup)};
    } else {
      parts = {Value::string(s.substr(0, at), markup), Value::string(sep, markup),
               Value::string(s.substr(at + sep.size()), markup)};
    }
    return Value::new_tuple(std::move(parts));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = bind_args(name, args, {"affix"});
    if (!a[0]) raise("TypeError", fmt::format("{}() takes exactly one argument (0 given)", name));
    const std::string& affix = str_arg(*a[0], name);
    if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0)
      return result(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
      return result(s.substr(0, s.size() - affix.size()));
    }
    return result(s);
  }
  if (!args.positional.empty() || !args.keyword.empty())
    raise("TypeError", fmt::format("{}() takes no arguments", name));
  if (name == "isdigit") return Value::boolean(py::all_of(s, py::is_digit));
  if (name == "isdecimal") return Value::boolean(py::all_of(s, py::is_decimal));
  if (name == "isnumeric") return Value::boolean(py::all_of(s, py::is_numeric));
  if (name == "isalpha") return Value::boolean(py::all_of(s, py::is_alpha));
  if (name == "isalnum") return Value::boolean(py::all_of(s, py::is_alnum));
  if (name == "isspace") return Value::boolean(py::all_of(s, py::is_space));
  if (name == "isprintable") return Value::boolean(s.empty() || py::all_of(s, py::is_printable));
  if (name == "isascii") return Value::boolean(py::is_ascii(s));
  if (name == "islower") return Value::boolean(py::is_lower(s));
  if (name == "isupper") return Value::boolean(py::is_upper(s));
  if (name == "istitle") return Value::boolean(py::is_title(s));
  raise("AttributeError", fmt::format("'str' object has no attribute '{}'", name));
}

Value list_method(Interpreter& interp, const Value& self, std::string_view name, CallArgs& args) {
  auto& items = self.list().items;
  if (name == "count") {
    auto a = bind_args(name, args, {"value"});
    if (!a[0]) raise("TypeError", "count() takes exactly one argument (0 given)");
    interp.charge(items.size());
    return Value::integer(std::count_if(items.begin(), items.end(),
                                        [&](const Value& v) { return equals(v, *a[0]); }));
  }
  if (name == "index") {
    auto a = bind_args(name, args, {"value", "start", "stop"});
    if (!a[0]) raise("TypeError", "index expected at least 1 argument, got 0");
    auto n = static_cast<int64_t>(items.size());
    int64_t lo = a[1] ? py::clamp_index(int_arg(*a[1], "start"), n) : 0;
    int64_t hi = a[2] ? py::clamp_index(int_arg(*a[2], "stop"), n) : n;
    interp.charge(items.size());
    for (int64_t i = lo; i < hi; ++i)
      if (equals(items[static_cast<size_t>(i)], *a[0])) return Value::integer(i);
    raise("ValueError", fmt::format("{} is not in {}", repr(*a[0]), type_name(self)));
  }
  if (name == "copy") {
    bind_args(name, args, {});
    return Value::new_list(items);
  }
  interp.track(self);
  if (name == "append") {
    auto a = bind_args(name, args, {"object"});
    if (!a[0]) raise("TypeError", "append() takes exactly one argument (0 given)");
    interp.check_size(items.size() + 1);
    items.push_back(*a[0]);
    return Value::none();
  }
  if (name == "extend") {
    auto a = bind_args(name, args, {"iterable"});
    if (!a[0]) raise("TypeError", "extend() takes exactly one argument (0 given)");
    std::vector<Value> extra = iterate(*a[0]);
    interp.check_size(items.size() + extra.size());
    interp.charge(extra.size());
    items.insert(items.end(), extra.begin(), extra.end());
    return Value::none();
  }
  if (name == "insert") {
    auto a = bind_args(name, args, {"index", "object"});
    if (!a[0] || !a[1]) raise("TypeError", "insert expected 2 arguments");
    interp.check_size(items.size() + 1);
    int64_t at = py::clamp_index(int_arg(*a[0], "index"), static_cast<int64_t>(items.size()));
    items.insert(items.begin() + at, *a[1]);
    return Value::none();
  }
  if (name == "pop") {
    auto a = bind_args(name, args, {"index"});
    if (items.empty()) raise("IndexError", "pop from empty list");
    auto n = static_cast<int64_t>(items.size());
    int64_t at = a[0] ? int_arg(*a[0], "index") : n - 1;
    if (at < 0) at += n;
    if (at < 0 || at >= n) raise("IndexError", "pop index out of range");
    Value v = std::move(items[static_cast<size_t>(at)]);
    items.erase(items.begin() + at);
    return v;
  }
  if (name == "remove") {
    auto a = bind_args(name, args, {"value"});
    if (!a[0]) raise("TypeError", "remove() takes exactly one argument (0 given)");
    for (size_t i = 0; i < items.size(); ++i) {
      if (equals(items[i], *a[0])) {
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
        return Value::none();
      }
    }
    raise("ValueError", "list.remove(x): x not in list");
  }
  if (name == "reverse") {
    bind_args(name, args, {});
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  if (name == "sort") {
    if (!args.positional.empty()) raise("TypeError", "sort() takes no positional arguments");
    auto a = bind_args(name, args, {"key", "reverse"});
    if (a[0] && !a[0]->is_none()) raise("TypeError", "sort(key=...) is not supported");
    bool reverse = a[1] && truthy(*a[1]);
    interp.charge(items.size() * 4);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? less_than(y, x) : less_than(x, y);
    });
    return Value::none();
  }
  if (name == "clear") {
    bind_args(name, args, {});
    items.clear();
    return Value::none();
  }
  raise("AttributeError", fmt::format("'list' object has no attribute '{}'", name));
}

Value dict_method(Interpreter& interp, const Value& self, std::string_view name, CallArgs& args) {
  DictData& d = self.dict();
  if (name == "keys" || name == "values" || name == "items") {
    bind_args(name, args, {});
    std::vector<Value> out;
    out.reserve(d.size());
    for (const auto& [k, v] : d.entries) {
      if (name == "keys") {
        out.push_back(k);
      } else if (name == "values") {
        out.push_back(v);
      } else {
        out.push_back(Value::new_tuple({k, v}));
      }
    }
    interp.charge(out.size());
    return Value::dict_view(std::move(out), name == "keys"     ? "dict_keys"
                                            : name == "values" ? "dict_values"
                                                               : "dict_items");
  }
  if (name == "get") {
    auto a = bind_args(name, args, {"key", "default"});
    if (!a[0]) raise("TypeError", "get expected at least 1 argument, got 0");
    if (!is_hashable(*a[0])) hash_key(*a[0]);
    const Value* v = d.find(*a[0]);
    if (v != nullptr) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  if (name == "copy") {
    bind_args(name, args, {});
    Value out = Value::new_dict();
    for (const auto& [k, v] : d.entries) out.dict().set(k, v);
    return out;
  }
  interp.track(self);
  if (name == "pop") {
    auto a = bind_args(name, args, {"key", "default"});
    if (!a[0]) raise("TypeError", "pop expected at least 1 argument, got 0");
    if (!is_hashable(*a[0])) hash_key(*a[0]);
    if (const Value* v = d.find(*a[0])) {
      Value out = *v;
      d.erase(*a[0]);
      return out;
    }
    if (a[1]) return *a[1];
    raise("KeyError", repr(*a[0]));
  }
  if (name == "popitem") {
    bind_args(name, args, {});
    if (d.entries.empty()) raise("KeyError", "'popitem(): dictionary is empty'");
    auto [k, v] = d.pop_last();
    return Value::new_tuple({std::move(k), std::move(v)});
  }
  if (name == "setdefault") {
    auto a = bind_args(name, args, {"key", "default"});
    if (!a[0]) raise("TypeError", "setdefault expected at least 1 argument, got 0");
    if (const Value* v = d.find(*a[0])) return *v;
    Value value = a[1] ? *a[1] : Value::none();
    interp.check_size(d.size() + 1);
    d.set(*a[0], value);
    return value;
  }
  if (name == "update") {
    if (args.positional.size() > 1) raise("TypeError", "update expected at most 1 argument");
    if (!args.positional.empty()) {
      const Value& other = args.positional[0];
      if (other.is_dict()) {
        std::vector<std::pair<Value, Value>> copy = other.dict().entries;
        for (auto& [k, v] : copy) d.set(std::move(k), std::move(v));
      } else {
        for (const Value& pair : iterate(other)) {
          std::vector<Value> kv = iterate(pair);
          if (kv.size() != 2) {
            raise("ValueError", "dictionary update sequence element has the wrong length");
          }
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
    interp.check_size(d.size());
    return Value::none();
  }
  if (name == "clear") {
    bind_args(name, args, {});
    d.clear();
    return Value::none();
  }
  raise("AttributeError", fmt::format("'dict' object has no attribute '{}'", name));
}

// ---- str.format ----

struct FormatSpec {
  char32_t fill = ' ';
  char align = 0;
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  int64_t width = -1;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

FormatSpec parse_spec(const std::string& spec) {
  FormatSpec f;
  std::u32string cps = py::decode(spec);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    f.fill = cps[0];
    f.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    f.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' '))
    f.sign = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == 'z') ++i;
  if (i < cps.size() && cps[i] == '#') {
    f.alternate = true;
    ++i;
  }
  if (i < cps.size() && cps[i] == '0') {
    f.zero = true;
    ++i;
  }
  auto digits = [&]() {
    int64_t n = -1;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
      n = std::max<int64_t>(n, 0) * 10 + (cps[i++] - '0');
      if (n > 1'000'000) raise("ValueError", "Too many decimal digits in format string");
    }
    return n;
  };
  f.width = digits();
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) f.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    f.precision = digits();
    if (f.precision < 0) raise("ValueError", "Format specifier missing precision");
  }
  if (i < cps.size()) f.type = static_cast<char>(cps[i++]);
  if (i < cps.size()) raise("ValueError", "Invalid format specifier");
  return f;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  int count = 0;
  for (size_t i = digits.size(); i > 0; --i) {
    if (count > 0 && count % 3 == 0) out += sep;
    out += digits[i - 1];
    ++count;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string format_number(const Value& v, const FormatSpec& f) {
  std::string body;
  bool negative = false;
  char type = f.type;
  bool is_int = !v.is_float() && type != 'e' && type != 'E' && type != 'f' && type != 'F' &&
                type != 'g' && type != 'G' && type != '%';
  std::string prefix;
  if (is_int) {
    int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
    negative = i < 0;
    uint64_t mag = negative ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    if (type == 'c') {
      py::append_utf8(body, static_cast<char32_t>(mag));
    } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      int base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
      const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      do {
        body.insert(body.begin(), alphabet[mag % static_cast<uint64_t>(base)]);
        mag /= static_cast<uint64_t>(base);
      } while (mag > 0);
      if (f.alternate) prefix = std::string("0") + (type == 'X' ? 'X' : type);
    } else if (type == 0 || type == 'd' || type == 'n') {
      body = std::to_string(mag);
      if (f.grouping) body = group_digits(body, f.grouping);
    } else {
      raise("ValueError", fmt::format("Unknown format code '{}' for object of type 'int'", type));
    }
  } else {
    double d = v.to_double();
    negative = std::signbit(d) && !std::isnan(d);
    double mag = std::fabs(d);
    int64_t precision = f.precision < 0 ? 6 : f.precision;
    char buf[512];
    if (type == 0 && f.precision < 0) {
      body = format_float(mag);
    } else if (type == '%') {
      std::snprintf(buf, sizeof(buf), "%.*f%%", static_cast<int>(std::min<int64_t>(precision, 100)),
                    mag * 100);
      body = buf;
    } else {
      char t = type == 0 ? 'g' : type;
      if (std::string_view("eEfFgG").find(t) == std::string_view::npos) {
        raise("ValueError", fmt::format("Unknown format code '{}' for object of type 'float'", t));
      }
      std::snprintf(buf, sizeof(buf), fmt::format("%{}.*{}", f.alternate ? "#" : "", t).c_str(),
                    static_cast<int>(std::min<int64_t>(precision, 100)), mag);
      body = buf;
      if (type == 0 && body.find_first_of(".einn") == std::string::npos) body += ".0";
    }
    if (f.grouping) {
      size_t end = body.find_first_not_of("0123456789");
      if (end == std::string::npos) end = body.size();
      body = group_digits(body.substr(0, end), f.grouping) + body.substr(end);
    }
  }
  std::string sign = negative ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  char align = f.align != 0 ? f.align : '>';
  char32_t fill = f.fill;
  if (f.zero && f.align == 0) {
    align = '=';
    fill = '0';
  }
  if (align == '=') {
    auto len = static_cast<int64_t>(sign.size() + prefix.size() + body.size());
    std::string padding;
    for (int64_t k = len; k < f.width; ++k) py::append_utf8(padding, fill);
    return sign + prefix + padding + body;
  }
  return pad(sign + prefix + body, f.width, fill, align);
}

std::string format_value(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  FormatSpec f = parse_spec(spec);
  if (v.is_string()) {
    if (f.type != 0 && f.type != 's') {
      raise("ValueError", fmt::format("Unknown format code '{}' for object of type 'str'", f.type));
    }
    std::string s = v.str();
    if (f.precision >= 0) s = py::encode(py::decode(s).substr(0, static_cast<size_t>(f.precision)));
    return pad(s, f.width, f.fill, f.align != 0 ? f.align : '<');
  }
  if (v.is_number()) return format_number(v, f);
  raise("TypeError",
        fmt::format("unsupported format string passed to {}.__format__", type_name(v)));
}

Value resolve_field(Interpreter& interp, const std::string& field, CallArgs& args,
                    size_t& auto_index) {
  size_t end = field.find_first_of(".[");
  std::string head = field.substr(0, end);
  Value v;
  if (head.empty()) {
    if (auto_index >= args.positional.size()) {
      raise("IndexError",
            fmt::format("Replacement index {} out of range for positional args tuple", auto_index));
    }
    v = args.positional[auto_index++];
  } else if (std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    size_t i = std::stoul(head.substr(0, 9));
    if (i >= args.positional.size()) {
      raise("IndexError",
            fmt::format("Replacement index {} out of range for positional args tuple", i));
    }
    v = args.positional[i];
  } else {
    auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                           [&](auto& kv) { return kv.first == head; });
    if (it == args.keyword.end()) raise("KeyError", repr_string(head));
    v = it->second;
  }
  size_t pos = end;
  while (pos != std::string::npos && pos < field.size()) {
    if (field[pos] == '.') {
      size_t next = field.find_first_of(".[", pos + 1);
      std::string attr =
          field.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      v = interp.get_attr(v, attr);
      pos = next;
    } else {
      size_t close = field.find(']', pos);
      if (close == std::string::npos) raise("ValueError", "Missing ']' in format string");
      std::string key = field.substr(pos + 1, close - pos - 1);
      bool numeric =
          !key.empty() && key.size() < 10 &&
          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      v = interp.get_item(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
      pos = close + 1;
      if (pos < field.size() && field[pos] != '.' && field[pos] != '[') {
        raise("ValueError", "Only '.' or '[' may follow ']' in format field specifier");
      }
    }
  }
  return v;
}

}  // namespace

bool has_method(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Kind::kString:
      return in(kStrMethods, name) || in(kStrMethodsMore, name);
    case Kind::kList:
      if (self.is_view()) return false;
      if (self.list().tuple) return name == "count" || name == "index";
      return in(kListMethods, name);
    case Kind::kDict:
      return in(kDictMethods, name);
    default:
      return false;
  }
}

bool is_mutating_method(const Value& self, std::string_view name) {
  if (self.is_list() && !self.list().tuple) {
    return name == "append" || name == "clear" || name == "extend" || name == "insert" ||
           name == "pop" || name == "remove" || name == "reverse" || name == "sort";
  }
  if (self.is_dict()) {
    return name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
           name == "update";
  }
  return false;
}

Value call_method(Interpreter& interp, const Value& self, std::string_view name, CallArgs& args) {
  switch (self.kind()) {
    case Kind::kString:
      return str_method(interp, self, name, args);
    case Kind::kList:
      return list_method(interp, self, name, args);
    case Kind::kDict:
      return dict_method(interp, self, name, args);
    default:
      raise("AttributeError",
            fmt::format("'{}' object has no attribute '{}'", type_name(self), name));
  }
}

Value bound_method(const Value& self, std::string_view name) {
  return Value::object(std::make_shared<BoundMethod>(self, std::string(name)));
}

std::string str_format(Interpreter& interp, const std::string& format, CallArgs& args,
                       bool escape) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      raise("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) raise("ValueError", "Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) {
      raise("ValueError", "nested replacement fields are not supported");
    }
    i = close;
    std::string spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) raise("ValueError", "expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    Value v = resolve_field(interp, field, args, auto_index);
    if (conversion == 'r' || conversion == 'a') {
      v = Value::string(repr(v));
    } else if (conversion == 's') {
      v = Value::string(to_str(v));
    } else if (conversion != 0) {
      raise("ValueError", fmt::format("Unknown conversion specifier {}", conversion));
    }
    std::string field_text = format_value(v, spec);
    out += escape && !v.is_markup() ? escape_html(field_text) : field_text;
    interp.check_size(out.size());
  }
  return out;
}

}  // namespace strata::text::jinja
