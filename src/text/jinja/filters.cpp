// Jinja2 3.1's built-in filters and tests with their Python semantics (generators from map and
// select, Markup-preserving string filters, attribute getters with dotted paths), and HF's tojson
// (json.dumps with ensure_ascii=False and the indent, separators and sort_keys arguments).
#include "text/jinja/filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "text/jinja/interpreter.h"
#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

// ---- helpers ----

Value require(const std::optional<Value>& v, std::string_view filter, std::string_view arg) {
  if (!v) {
    raise("TypeError", fmt::format("{}() missing required argument: '{}'", filter, arg));
  }
  return *v;
}

// markupsafe's soft_str: str(value) unless it already is a string (Markup stays Markup).
Value soft_str(const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(v));
}

Value ignore_case(const Value& v) {
  if (v.is_string()) return Value::string(py::lower(v.str()));
  return v;
}

// Jinja's make_attrgetter: `attribute` is a dotted path ("a.b.0") looked up with getitem.
class AttrGetter {
 public:
  AttrGetter(const std::optional<Value>& attribute, bool lower, std::optional<Value> fallback = {})
      : lower_(lower), default_(std::move(fallback)) {
    if (!attribute || attribute->is_none()) return;
    if (attribute->is_int()) {
      parts_.push_back(*attribute);
      return;
    }
    for (const std::string& part : py::split(to_str(*attribute), std::string_view("."), -1)) {
      bool digits =
          !part.empty() && part.size() < 18 &&
          std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts_.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(part));
    }
  }

  Value operator()(Interpreter& interp, Value item) const {
    for (const Value& part : parts_) {
      item = interp.get_item(item, part);
      if (default_ && !default_->is_none() && item.is_undefined()) item = *default_;
    }
    return lower_ ? ignore_case(item) : item;
  }

 private:
  std::vector<Value> parts_;
  bool lower_;
  std::optional<Value> default_;
};

// Runs `produce` for a filter that returns a Python generator: what it produces before failing is
// yielded, and its error is raised only when the generator is consumed past that point.
template <typename Produce>
Value lazy(Produce&& produce, const char* type_name = "generator") {
  std::vector<Value> items;
  std::string error;
  try {
    produce(items);
  } catch (const Error& e) {
    error = e.what();
  }
  Value out = Value::iterator(std::move(items), type_name);
  out.iterator().error = std::move(error);
  return out;
}

// Sorts `items` by key, stably, as Python's sorted(key=..., reverse=...).
void sort_by_keys(Interpreter& interp, std::vector<Value>& items, std::vector<Value> keys,
                  bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  interp.charge(items.size() * 8);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? less_than(keys[b], keys[a]) : less_than(keys[a], keys[b]);
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

size_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return py::length(v.str());
    case Kind::kList:
      return v.list().items.size();
    case Kind::kDict:
      return v.dict().size();
    default:
      raise("TypeError", fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

std::string html_unescape(const std::string& s) {
  static const std::pair<std::string_view, std::string_view> kEntities[] = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    std::string_view name = std::string_view(s).substr(i + 1, semi - i - 1);
    bool done = false;
    if (!name.empty() && name[0] == '#') {
      bool hex = name.size() > 1 && (name[1] == 'x' || name[1] == 'X');
      std::string digits(name.substr(hex ? 2 : 1));
      char* end = nullptr;
      unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (!digits.empty() && *end == '\0' && cp <= 0x10FFFF) {
        py::append_utf8(out, static_cast<char32_t>(cp));
        done = true;
      }
    } else {
      for (const auto& [entity, text] : kEntities) {
        if (name == entity) {
          out += text;
          done = true;
          break;
        }
      }
    }
    if (done) {
      i = semi;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Python's round(x, ndigits) for floats: correctly rounded, ties to even.
double round_float(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 300) return x;
  if (ndigits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-ndigits));
  if (std::isinf(scale)) return 0.0 * x;
  double y = x / scale;
  double r = std::nearbyint(y);  // the default rounding mode rounds ties to even
  return r * scale;
}

// ---- filters ----

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("abs", args, {});
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) raise("OverflowError", "integer result does not fit in 64 bits");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  raise("TypeError", fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value f_attr(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("attr", args, {"name"});
  std::string name = to_str(require(a[0], "attr", "name"));
  if (v.is_dict() && !has_method(v, name)) {
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(v), name));
  }
  return interp.get_attr(v, name);
}

Value f_batch(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("batch", args, {"linecount", "fill_with"});
  int64_t count = int_arg(require(a[0], "batch", "linecount"), "linecount");
  if (count <= 0) raise("ValueError", "batch size must be positive");
  if (a[1] && !a[1]->is_none()) interp.check_size(static_cast<size_t>(count));
  return lazy([&](std::vector<Value>& out) {
    std::vector<Value> items = iterate(v);
    interp.charge(items.size());
    for (size_t i = 0; i < items.size(); i += static_cast<size_t>(count)) {
      std::vector<Value> chunk(items.begin() + static_cast<std::ptrdiff_t>(i),
                               items.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                   items.size(), i + static_cast<size_t>(count))));
      if (chunk.size() < static_cast<size_t>(count) && a[1] && !a[1]->is_none()) {
        chunk.resize(static_cast<size_t>(count), *a[1]);
      }
      out.push_back(Value::new_list(std::move(chunk)));
    }
  });
}

Value f_capitalize(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("capitalize", args, {});
  Value s = soft_str(v);
  return interp.make_string(py::capitalize(s.str()), s.is_markup());
}

Value f_center(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("center", args, {"width"});
  CallArgs method_args;
  method_args.positional.push_back(a[0] ? *a[0] : Value::integer(80));
  return call_method(interp, soft_str(v), "center", method_args);
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  auto a = bind_args("default", args, {"default_value", "boolean"});
  bool boolean = a[1] && truthy(*a[1]);
  if (v.is_undefined() || (boolean && !truthy(v))) return a[0] ? *a[0] : Value::string("");
  return v;
}

Value f_dictsort(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("dictsort", args, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = a[0] && truthy(*a[0]);
  std::string by = a[1] ? to_str(*a[1]) : "key";
  if (by != "key" && by != "value") {
    raise("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  }
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_dict())
    raise("AttributeError", fmt::format("'{}' object has no attribute 'items'", type_name(v)));
  std::vector<Value> items;
  std::vector<Value> keys;
  for (const auto& [k, val] : v.dict().entries) {
    items.push_back(Value::new_tuple({k, val}));
    const Value& key = by == "key" ? k : val;
    keys.push_back(case_sensitive ? key : ignore_case(key));
  }
  sort_by_keys(interp, items, std::move(keys), a[2] && truthy(*a[2]));
  return Value::new_list(std::move(items));
}

Value f_escape(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("escape", args, {});
  if (v.is_markup()) return v;
  return interp.make_string(escape_html(to_str(v)), true);
}

Value f_forceescape(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("forceescape", args, {});
  return interp.make_string(escape_html(to_str(v)), true);
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("first", args, {});
  if (v.is_iterator()) {
    IteratorData& it = v.iterator();
    if (it.pos < it.items.size()) return it.items[it.pos++];
    if (!it.error.empty()) it.raise_error();
    return Value::undefined("No first item, sequence was empty.");
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("last", args, {});
  if (v.is_iterator()) {
    raise("TypeError", fmt::format("'{}' object is not reversible", type_name(v)));
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

std::optional<double> parse_python_float(std::string s) {
  s = py::strip(s, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  std::string lower = py::lower(s);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  double sign = lower[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  bool any_digit = false;
  for (char c : body) {
    if (c >= '0' && c <= '9') {
      any_digit = true;
    } else if (c != '.' && c != 'e' && c != '+' && c != '-') {
      return std::nullopt;
    }
  }
  if (!any_digit) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

std::optional<int64_t> parse_python_int(std::string s, int base) {
  s = py::strip(s, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  bool negative = false;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    i = 1;
  }
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  if (base == 0) {
    base = 10;
    if (digits.size() > 1 && digits[0] == '0') {
      char p = static_cast<char>(digits[1] | 0x20);
      base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (base == 0) return std::nullopt;
      digits = digits.substr(2);
    }
  } else if (digits.size() > 2 && digits[0] == '0') {
    char p = static_cast<char>(digits[1] | 0x20);
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2))
      digits = digits.substr(2);
  }
  if (digits.empty() || base < 2 || base > 36) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || digits[0] == '-' || digits[0] == '+') return std::nullopt;
  return negative ? -v : v;
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  auto a = bind_args("float", args, {"default"});
  Value fallback = a[0] ? *a[0] : Value::number(0.0);
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return Value::number(v.to_double());
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_string()) {
    if (auto d = parse_python_float(v.str())) return Value::number(*d);
  }
  return fallback;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  auto a = bind_args("int", args, {"default", "base"});
  Value fallback = a[0] ? *a[0] : Value::integer(0);
  int base = a[1] ? static_cast<int>(int_arg(*a[1], "base")) : 10;
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
  if (v.is_float()) {
    double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_string()) {
    if (auto i = parse_python_int(v.str(), base)) return Value::integer(*i);
    if (auto d = parse_python_float(v.str())) {
      if (std::isfinite(*d) && std::fabs(*d) < 9.2e18)
        return Value::integer(static_cast<int64_t>(std::trunc(*d)));
    }
  }
  return fallback;
}

Value f_format(Interpreter& interp, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    raise("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.keyword.empty()) {
    params = Value::new_dict();
    for (auto& [k, val] : args.keyword) params.dict().set(Value::string(k), val);
  } else {
    params = Value::new_tuple(args.positional);
  }
  Value s = soft_str(v);
  return interp.make_string(percent_format(interp, s.str(), params, s.is_markup()), s.is_markup());
}

Value f_groupby(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("groupby", args, {"attribute", "default", "case_sensitive"});
  Value attribute = require(a[0], "groupby", "attribute");
  bool case_sensitive = a[2] && truthy(*a[2]);
  std::optional<Value> fallback = a[1];
  AttrGetter key_of(attribute, !case_sensitive, fallback);
  AttrGetter output_of(attribute, false, fallback);
  std::vector<Value> items = iterate(v);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(key_of(interp, item));
  sort_by_keys(interp, items, keys, false);
  keys.clear();
  for (const Value& item : items) keys.push_back(key_of(interp, item));
  std::vector<Value> groups;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < items.size() && equals(keys[j], keys[i])) members.push_back(items[j++]);
    groups.push_back(
        Value::new_tuple({output_of(interp, items[i]), Value::new_list(std::move(members))}));
    i = j;
  }
  return Value::new_list(std::move(groups));
}

Value f_indent(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("indent", args, {"width", "first", "blank"});
  std::string indention;
  if (a[0] && a[0]->is_string()) {
    indention = a[0]->str();
  } else {
    int64_t width = a[0] ? int_arg(*a[0], "width") : 4;
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    indention = std::string(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  bool first = a[1] && truthy(*a[1]);
  bool blank = a[2] && truthy(*a[2]);
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string()) {
    raise("TypeError",
          fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v)));
  }
  const Value& s = v;
  std::string text = s.str() + "\n";
  std::vector<std::string> lines = py::splitlines(text, false);
  interp.check_size(text.size() + lines.size() * indention.size());
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention + lines[i];
    }
  }
  if (first) out = indention + out;
  return interp.make_string(std::move(out), s.is_markup());
}

Value f_items(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("items", args, {});
  return lazy([&](std::vector<Value>& out) {
    if (v.is_undefined()) return;
    if (!v.is_dict()) raise("TypeError", "Can only get item pairs from a mapping.");
    out.reserve(v.dict().size());
    for (const auto& [k, val] : v.dict().entries) out.push_back(Value::new_tuple({k, val}));
    interp.charge(out.size());
  });
}

Value f_join(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("join", args, {"d", "attribute"});
  std::string sep = a[0] ? to_str(*a[0]) : "";
  std::vector<Value> items = iterate(v);
  interp.charge(items.size());
  AttrGetter getter(a[1], false);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    append_str(out, a[1] ? getter(interp, items[i]) : items[i]);
    interp.check_size(out.size());
  }
  return interp.make_string(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("length", args, {});
  return Value::integer(static_cast<int64_t>(length_of(v)));
}

Value f_list(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("list", args, {});
  std::vector<Value> items = iterate(v);
  interp.charge(items.size());
  return Value::new_list(std::move(items));
}

Value f_lower(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("lower", args, {});
  Value s = soft_str(v);
  return interp.make_string(py::lower(s.str()), s.is_markup());
}

Value f_upper(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("upper", args, {});
  Value s = soft_str(v);
  return interp.make_string(py::upper(s.str()), s.is_markup());
}

Value f_map(Interpreter& interp, const Value& v, CallArgs& args) {
  return lazy([&](std::vector<Value>& out) {
    if (!truthy(v)) return;
    std::vector<Value> items = iterate(v);
    interp.charge(items.size());
    out.reserve(items.size());
    auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(),
                                  [](auto& kv) { return kv.first == "attribute"; });
    if (args.positional.empty() && attribute != args.keyword.end()) {
      std::optional<Value> fallback;
      for (auto& [k, val] : args.keyword) {
        if (k == "default") {
          fallback = val;
        } else if (k != "attribute") {
          raise("FilterArgumentError", fmt::format("Unexpected keyword argument '{}'", k));
        }
      }
      AttrGetter getter(attribute->second, false, fallback);
      for (const Value& item : items) out.push_back(getter(interp, item));
      return;
    }
    if (args.positional.empty()) raise("FilterArgumentError", "map requires a filter argument");
    std::string name = to_str(args.positional[0]);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& item : items) {
      CallArgs call_args = rest;
      out.push_back(interp.call_filter(name, item, call_args));
    }
  });
}

Value min_or_max(Interpreter& interp, const Value& v, CallArgs& args, bool max, const char* name) {
  auto a = bind_args(name, args, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  interp.charge(items.size());
  AttrGetter key_of(a[1], !(a[0] && truthy(*a[0])));
  size_t best = 0;
  Value best_key = key_of(interp, items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = key_of(interp, items[i]);
    if (max ? less_than(best_key, key) : less_than(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_max(Interpreter& interp, const Value& v, CallArgs& args) {
  return min_or_max(interp, v, args, true, "max");
}
Value f_min(Interpreter& interp, const Value& v, CallArgs& args) {
  return min_or_max(interp, v, args, false, "min");
}

Value select_or_reject(Interpreter& interp, const Value& v, CallArgs& args, bool select,
                       bool lookup_attr) {
  return lazy([&](std::vector<Value>& out) {
    if (!truthy(v)) return;
    std::optional<AttrGetter> getter;
    size_t off = 0;
    if (lookup_attr) {
      if (args.positional.empty())
        raise("FilterArgumentError", "Missing parameter for attribute name");
      getter.emplace(args.positional[0], false);
      off = 1;
    }
    std::optional<std::string> test;
    CallArgs test_args;
    if (args.positional.size() > off) {
      test = to_str(args.positional[off]);
      test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                                  args.positional.end());
      test_args.keyword = args.keyword;
    }
    std::vector<Value> items = iterate(v);
    interp.charge(items.size());
    for (const Value& item : items) {
      Value subject = getter ? (*getter)(interp, item) : item;
      bool passed;
      if (test) {
        CallArgs call_args = test_args;
        passed = interp.call_test(*test, subject, call_args);
      } else {
        passed = truthy(subject);
      }
      if (passed == select) out.push_back(item);
    }
  });
}

Value f_select(Interpreter& interp, const Value& v, CallArgs& args) {
  return select_or_reject(interp, v, args, true, false);
}
Value f_reject(Interpreter& interp, const Value& v, CallArgs& args) {
  return select_or_reject(interp, v, args, false, false);
}
Value f_selectattr(Interpreter& interp, const Value& v, CallArgs& args) {
  return select_or_reject(interp, v, args, true, true);
}
Value f_rejectattr(Interpreter& interp, const Value& v, CallArgs& args) {
  return select_or_reject(interp, v, args, false, true);
}

Value f_replace(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("replace", args, {"old", "new", "count"});
  std::string s = to_str(v);
  std::string old = to_str(require(a[0], "replace", "old"));
  std::string repl = to_str(require(a[1], "replace", "new"));
  int64_t count = a[2] && !a[2]->is_none() ? int_arg(*a[2], "count") : -1;
  if (!repl.empty()) {
    size_t hits = old.empty() ? py::length(s) + 1 : static_cast<size_t>(py::count(s, old, {}, {}));
    interp.check_size(s.size() + hits * repl.size());
  }
  return interp.make_string(py::replace(s, old, repl, count));
}

Value f_reverse(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("reverse", args, {});
  if (v.is_string()) {
    return slice_value(interp, v, Value::none(), Value::none(), Value::integer(-1));
  }
  if (v.is_list() || v.is_dict() || v.is_undefined() || v.is_iterator()) {
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    interp.charge(items.size());
    if (v.is_iterator()) return Value::new_list(std::move(items));
    return Value::iterator(std::move(items),
                           v.is_dict() ? "dict_reversekeyiterator" : "list_reverseiterator");
  }
  raise("FilterArgumentError", "argument must be iterable");
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  auto a = bind_args("round", args, {"precision", "method"});
  int64_t precision = a[0] ? int_arg(*a[0], "precision") : 0;
  std::string method = a[1] ? to_str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    raise("FilterArgumentError", "method must be common, ceil or floor");
  }
  if (!v.is_number()) {
    raise("TypeError", fmt::format("type {} doesn't define __round__ method", type_name(v)));
  }
  if (method == "common") {
    if (!v.is_float()) {
      int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
      if (precision >= 0) return Value::integer(i);
      return Value::integer(static_cast<int64_t>(round_float(static_cast<double>(i), precision)));
    }
    return Value::number(round_float(v.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.to_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("safe", args, {});
  if (v.is_markup()) return v;
  return interp.make_string(to_str(v), true);
}

Value f_slice(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("slice", args, {"slices", "fill_with"});
  int64_t slices = int_arg(require(a[0], "slice", "slices"), "slices");
  if (slices <= 0) raise("ZeroDivisionError", "integer division or modulo by zero");
  return lazy([&](std::vector<Value>& out) {
    std::vector<Value> items = iterate(v);
    interp.charge(items.size() + static_cast<size_t>(std::min<int64_t>(slices, 1 << 20)));
    interp.check_size(static_cast<size_t>(std::min<int64_t>(slices, INT32_MAX)));
    auto n = static_cast<int64_t>(items.size());
    int64_t per = n / slices;
    int64_t extra = n % slices;
    int64_t offset = 0;
    for (int64_t i = 0; i < slices; ++i) {
      int64_t start = offset + i * per;
      if (i < extra) ++offset;
      int64_t end = offset + (i + 1) * per;
      std::vector<Value> part(items.begin() + start, items.begin() + end);
      if (a[1] && !a[1]->is_none() && i >= extra) part.push_back(*a[1]);
      out.push_back(Value::new_list(std::move(part)));
    }
  });
}

Value f_sort(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a[0] && truthy(*a[0]);
  bool lower = !(a[1] && truthy(*a[1]));
  std::vector<Value> items = iterate(v);
  std::vector<AttrGetter> getters;
  if (a[2] && a[2]->is_string()) {
    for (const std::string& part : py::split(a[2]->str(), std::string_view(","), -1))
      getters.emplace_back(Value::string(part), lower);
  } else {
    getters.emplace_back(a[2], lower);
  }
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    if (getters.size() == 1) {
      keys.push_back(getters[0](interp, item));
    } else {
      std::vector<Value> parts;
      for (const auto& g : getters) parts.push_back(g(interp, item));
      keys.push_back(Value::new_list(std::move(parts)));
    }
  }
  sort_by_keys(interp, items, std::move(keys), reverse);
  return Value::new_list(std::move(items));
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("string", args, {});
  return soft_str(v);
}

Value f_striptags(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("striptags", args, {});
  std::string s = to_str(v);
  for (size_t start; (start = s.find("<!--")) != std::string::npos;) {
    size_t end = s.find("-->", start);
    if (end == std::string::npos) break;
    s.erase(start, end + 3 - start);
  }
  for (size_t start; (start = s.find('<')) != std::string::npos;) {
    size_t end = s.find('>', start);
    if (end == std::string::npos) break;
    s.erase(start, end + 1 - start);
  }
  std::string joined;
  for (const std::string& word : py::split(s, std::nullopt, -1)) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return interp.make_string(html_unescape(joined));
}

Value f_sum(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("sum", args, {"attribute", "start"});
  Value total = a[1] ? *a[1] : Value::integer(0);
  AttrGetter getter(a[0], false);
  for (const Value& item : iterate(v)) {
    if (total.is_string()) raise("TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
    total = binary_op(interp, BinaryOp::kAdd, total, a[0] ? getter(interp, item) : item);
  }
  return total;
}

Value f_title(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("title", args, {});
  Value s = soft_str(v);
  // Jinja splits at runs of `-`, whitespace and opening brackets, then capitalizes each piece.
  std::u32string cps = py::decode(s.str());
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    if (sep) {
      py::append_utf8(out, c);
      word_start = true;
      continue;
    }
    std::string ch;
    py::append_utf8(ch, c);
    out += word_start ? py::upper(ch) : py::lower(ch);
    word_start = false;
  }
  return interp.make_string(std::move(out), s.is_markup());
}

Value f_tojson(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a[0] && truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      o.indent_str = a[1]->str();
    } else {
      o.indent = static_cast<int>(std::clamp<int64_t>(int_arg(*a[1], "indent"), 0, 64));
    }
  }
  if (a[2] && !a[2]->is_none()) {
    std::vector<Value> seps = iterate(*a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      raise("ValueError", "separators must be a pair of strings");
    }
    o.item_separator = seps[0].str();
    o.key_separator = seps[1].str();
  }
  o.sort_keys = a[3] && truthy(*a[3]);
  std::string out = dumps_json(v, o);
  return interp.make_string(std::move(out));
}

Value f_trim(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("trim", args, {"chars"});
  Value s = soft_str(v);
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) {
    chars = to_str(*a[0]);
  }
  std::optional<std::string_view> view;
  if (chars) view = *chars;
  return interp.make_string(py::strip(s.str(), view, true, true), s.is_markup());
}

Value f_truncate(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("truncate", args, {"length", "killwords", "end", "leeway"});
  int64_t length = a[0] ? int_arg(*a[0], "length") : 255;
  bool killwords = a[1] && truthy(*a[1]);
  std::string end = a[2] ? to_str(*a[2]) : "...";
  int64_t leeway = a[3] && !a[3]->is_none() ? int_arg(*a[3], "leeway") : 5;
  auto end_len = static_cast<int64_t>(py::length(end));
  if (length < end_len)
    raise("AssertionError", fmt::format("expected length >= {}, got {}", end_len, length));
  if (leeway < 0) raise("AssertionError", fmt::format("expected leeway >= 0, got {}", leeway));
  std::string s = to_str(v);
  std::u32string cps = py::decode(s);
  if (static_cast<int64_t>(cps.size()) <= length + leeway)
    return v.is_string() ? v : Value::string(s);
  std::string head =
      py::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(length - end_len)));
  if (killwords) return interp.make_string(head + end);
  return interp.make_string(py::rsplit(head, std::string_view(" "), 1)[0] + end);
}

Value f_unique(Interpreter& interp, const Value& v, CallArgs& args) {
  auto a = bind_args("unique", args, {"case_sensitive", "attribute"});
  AttrGetter getter(a[1], !(a[0] && truthy(*a[0])));
  return lazy([&](std::vector<Value>& out) {
    std::vector<Value> items = iterate(v);
    interp.charge(items.size() * 4);
    std::vector<Value> seen;
    for (const Value& item : items) {
      Value key = getter(interp, item);
      hash_key(key);  // unhashable keys raise TypeError, as in Python's set
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
        interp.charge(seen.size());
        seen.push_back(std::move(key));
        out.push_back(item);
      }
    }
  });
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  bind_args("wordcount", args, {});
  int64_t count = 0;
  bool in_word = false;
  for (char32_t c : py::decode(to_str(v))) {
    bool w = py::is_word(c);
    if (w && !in_word) ++count;
    in_word = w;
  }
  return Value::integer(count);
}

// ---- tests ----

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_escaped(Interpreter&, const Value& v, CallArgs&) { return v.is_markup(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) { return is_iterable(v); }
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || (v.is_list() && !v.is_view()) || v.is_dict();
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || (v.is_object() && v.object().is_callable());
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) { return py::is_lower(to_str(v)); }
bool t_upper(Interpreter&, const Value& v, CallArgs&) { return py::is_upper(to_str(v)); }

Value test_arg(std::string_view test, CallArgs& args, std::string_view name) {
  auto a = bind_args(test, args, {name});
  return require(a[0], test, name);
}

bool t_odd(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("odd", args, {});
  return equals(binary_op(interp, BinaryOp::kMod, v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interpreter& interp, const Value& v, CallArgs& args) {
  bind_args("even", args, {});
  return equals(binary_op(interp, BinaryOp::kMod, v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interpreter& interp, const Value& v, CallArgs& args) {
  Value num = test_arg("divisibleby", args, "num");
  return equals(binary_op(interp, BinaryOp::kMod, v, num), Value::integer(0));
}
bool t_eq(Interpreter&, const Value& v, CallArgs& args) {
  return equals(v, test_arg("eq", args, "other"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& args) {
  return !equals(v, test_arg("ne", args, "other"));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& args) {
  return compare(v, test_arg("lt", args, "other"), "<");
}
bool t_le(Interpreter&, const Value& v, CallArgs& args) {
  return compare(v, test_arg("le", args, "other"), "<=");
}
bool t_gt(Interpreter&, const Value& v, CallArgs& args) {
  return compare(v, test_arg("gt", args, "other"), ">");
}
bool t_ge(Interpreter&, const Value& v, CallArgs& args) {
  return compare(v, test_arg("ge", args, "other"), ">=");
}
bool t_in(Interpreter&, const Value& v, CallArgs& args) {
  return contains(test_arg("in", args, "seq"), v);
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& args) {
  Value other = test_arg("sameas", args, "other");
  if (v.kind() != other.kind()) return false;
  if (v.identity() != nullptr) return v.identity() == other.identity();
  return equals(v, other);
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

Value unsupported_filter(const char* name) {
  raise("TemplateRuntimeError", fmt::format("the '{}' filter is not supported by strata", name));
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_forceescape},
      {"format", f_format},
      {"groupby", f_groupby},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"slice", f_slice},
      {"sort", f_sort},
      {"string", f_string},
      {"striptags", f_striptags},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
      // Jinja2 built-ins strata does not implement: known names, so a template that only uses
      // them in branches it never runs still renders.
      {"filesizeformat",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("filesizeformat"); }},
      {"pprint",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("pprint"); }},
      {"random",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("random"); }},
      {"urlencode",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("urlencode"); }},
      {"urlize",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("urlize"); }},
      {"wordwrap",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("wordwrap"); }},
      {"xmlattr",
       [](Interpreter&, const Value&, CallArgs&) { return unsupported_filter("xmlattr"); }},
  };
  return kFilters;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> kTests = {
      {"boolean", t_boolean},
      {"callable", t_callable},
      {"defined", t_defined},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"escaped", t_escaped},
      {"even", t_even},
      {"false", t_false},
      {"filter", t_filter},
      {"float", t_float},
      {"ge", t_ge},
      {">=", t_ge},
      {"greaterthan", t_gt},
      {"gt", t_gt},
      {">", t_gt},
      {"in", t_in},
      {"integer", t_integer},
      {"iterable", t_iterable},
      {"le", t_le},
      {"<=", t_le},
      {"lessthan", t_lt},
      {"lt", t_lt},
      {"<", t_lt},
      {"lower", t_lower},
      {"mapping", t_mapping},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", t_none},
      {"number", t_number},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", t_sequence},
      {"string", t_string},
      {"test", t_test},
      {"true", t_true},
      {"undefined", t_undefined},
      {"upper", t_upper},
  };
  return kTests;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto& table = filter_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

TestFn find_test(std::string_view name) {
  const auto& table = test_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace strata::text::jinja
