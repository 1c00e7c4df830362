// Python semantics over Jinja values (see value.h): construction, str()/repr(), equality and
// ordering, hashing of dict keys, iteration, and json.dumps as HF's tojson filter calls it.
#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

// Deeper nesting than this in repr/equality/json is treated like Python's RecursionError.
constexpr int kMaxValueDepth = 512;

void check_depth(int depth) {
  if (depth > kMaxValueDepth) raise("RecursionError", "maximum recursion depth exceeded");
}

const std::string& empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

// Moves out the children of containers that are about to die, so that destroying a deeply nested
// value is a loop rather than a recursion.
void drain_into(std::vector<Value>& stack, std::vector<Value>& items) {
  for (Value& v : items) stack.push_back(std::move(v));
  items.clear();
}

void destroy_iteratively(std::vector<Value>& stack) {
  while (!stack.empty()) {
    Value v = std::move(stack.back());
    stack.pop_back();
    if (v.is_list() && v.list_ptr().use_count() == 1) {
      drain_into(stack, v.list().items);
    } else if (v.is_dict() && v.dict_ptr().use_count() == 1) {
      for (auto& [k, val] : v.dict().entries) {
        stack.push_back(std::move(k));
        stack.push_back(std::move(val));
      }
      v.dict().clear();
    } else if (v.is_object() && v.object_ptr().use_count() == 1) {
      v.object().drain(stack);
    }
  }
}

void append_repr(std::string& out, const Value& v, int depth);

void append_sequence_repr(std::string& out, const ListData& list, int depth) {
  if (list.view != nullptr) out += std::string(list.view) + "(";
  out += list.tuple ? '(' : '[';
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i > 0) out += ", ";
    append_repr(out, list.items[i], depth + 1);
  }
  if (list.tuple && list.items.size() == 1) out += ',';
  out += list.tuple ? ')' : ']';
  if (list.view != nullptr) out += ')';
}

void append_dict_repr(std::string& out, const DictData& dict, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : dict.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, v, depth + 1);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kString:
      if (v.is_markup()) {
        out += "Markup(";
        out += repr_string(v.str());
        out += ')';
      } else {
        out += repr_string(v.str());
      }
      return;
    case Kind::kList:
      append_sequence_repr(out, v.list(), depth);
      return;
    case Kind::kDict:
      append_dict_repr(out, v.dict(), depth);
      return;
    default:
      append_str(out, v);
  }
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (&x == &y) return true;
      if (x.tuple != y.tuple || x.view != y.view || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals_at(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (other == nullptr || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

[[noreturn]] void unordered(const Value& a, const Value& b, std::string_view op) {
  raise("TypeError", fmt::format("'{}' not supported between instances of '{}' and '{}'", op,
                                 type_name(a), type_name(b)));
}

bool compare_at(const Value& a, const Value& b, std::string_view op, int depth) {
  check_depth(depth);
  auto apply = [&](auto x, auto y) {
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  };
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return apply(a.to_double(), b.to_double());
    int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return apply(x, y);
  }
  if (a.is_string() && b.is_string()) return apply(a.str().compare(b.str()), 0);
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple && !a.is_view() &&
      !b.is_view()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    size_t n = std::min(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], op, depth + 1);
    }
    return apply(x.size(), y.size());
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  unordered(a, b, op);
}

size_t hash_combine(size_t seed, size_t h) {
  return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else if (c >= 0x80 && ensure_ascii) {
          size_t start = i;
          while (i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) ++i;
          for (char32_t cp : py::decode(s.substr(start, i - start + 1))) {
            if (cp >= 0x10000) {
              cp -= 0x10000;
              out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
              out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
            }
          }
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

class JsonDumper {
 public:
  explicit JsonDumper(const JsonDumpOptions& o) : o_(o) {
    if (o.indent_str) {
      indent_ = *o.indent_str;
      pretty_ = true;
    } else if (o.indent >= 0) {
      indent_ = std::string(static_cast<size_t>(o.indent), ' ');
      pretty_ = true;
    }
    item_sep_ = o.item_separator.value_or(pretty_ ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void dump(std::string& out, const Value& v, int depth) {
    check_depth(depth);
    switch (v.kind()) {
      case Kind::kNone:
        out += "null";
        return;
      case Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Kind::kInt:
        out += std::to_string(v.as_int());
        return;
      case Kind::kFloat:
        out += json_float(v.as_float());
        return;
      case Kind::kString:
        dump_string(out, v.str(), o_.ensure_ascii);
        return;
      case Kind::kList:
        if (v.is_view()) break;
        dump_list(out, v, depth);
        return;
      case Kind::kDict:
        dump_dict(out, v, depth);
        return;
      default:
        break;
    }
    raise("TypeError", fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }

 private:
  void newline(std::string& out, int level) {
    if (!pretty_) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += indent_;
  }

  void enter(const Value& v) {
    if (std::find(path_.begin(), path_.end(), v.identity()) != path_.end())
      raise("ValueError", "Circular reference detected");
    path_.push_back(v.identity());
  }

  void dump_list(std::string& out, const Value& v, int depth) {
    const auto& items = v.list().items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    enter(v);
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      newline(out, depth + 1);
      dump(out, items[i], depth + 1);
    }
    newline(out, depth);
    out += ']';
    path_.pop_back();
  }

  static std::string key_string(const Value& k) {
    switch (k.kind()) {
      case Kind::kString:
        return k.str();
      case Kind::kNone:
        return "null";
      case Kind::kBool:
        return k.as_bool() ? "true" : "false";
      case Kind::kInt:
        return std::to_string(k.as_int());
      case Kind::kFloat:
        return json_float(k.as_float());
      default:
        raise("TypeError",
              fmt::format("keys must be str, int, float, bool or None, not {}", type_name(k)));
    }
  }

  void dump_dict(std::string& out, const Value& v, int depth) {
    const auto& entries = v.dict().entries;
    if (entries.empty()) {
      out += "{}";
      return;
    }
    enter(v);
    std::vector<const std::pair<Value, Value>*> order;
    order.reserve(entries.size());
    for (const auto& e : entries) order.push_back(&e);
    if (o_.sort_keys) {
      std::stable_sort(order.begin(), order.end(),
                       [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
    }
    out += '{';
    bool first = true;
    for (const auto* e : order) {
      if (!first) out += item_sep_;
      first = false;
      newline(out, depth + 1);
      dump_string(out, key_string(e->first), o_.ensure_ascii);
      out += key_sep_;
      dump(out, e->second, depth + 1);
    }
    newline(out, depth);
    out += '}';
    path_.pop_back();
  }

  const JsonDumpOptions& o_;
  bool pretty_ = false;
  std::string indent_;
  std::string item_sep_;
  std::string key_sep_;
  std::vector<const void*> path_;
};

template <typename J>
Value value_from_json(const J& j, int depth) {
  if (depth > kMaxValueDepth) fail(ErrorKind::kInvalidInput, "template context nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(value_from_json(e, depth + 1));
      return Value::new_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::new_dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict().set(Value::string(it.key()), value_from_json(it.value(), depth + 1));
      return d;
    }
    default:
      fail(ErrorKind::kInvalidInput, "template context holds an unsupported JSON value ({})",
           j.type_name());
  }
}

}  // namespace

void raise(std::string_view py_type, const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, fmt::format("{}: {}", py_type, message));
}

// ---- Value ----

Value Value::undefined(std::string hint, bool security) {
  Undefined u;
  u.info = std::make_shared<const UndefinedInfo>(UndefinedInfo{std::move(hint), security});
  return Value(std::move(u));
}

Value Value::string(std::string s, bool markup) {
  if (s.empty()) return Value(Str{nullptr, markup});
  return Value(Str{std::make_shared<const std::string>(std::move(s)), markup});
}

Value Value::string_ref(std::shared_ptr<const std::string> s, bool markup) {
  return Value(Str{std::move(s), markup});
}

Value Value::new_list(std::vector<Value> items) {
  return Value(std::make_shared<ListData>(std::move(items), false));
}
Value Value::new_tuple(std::vector<Value> items) {
  return Value(std::make_shared<ListData>(std::move(items), true));
}
Value Value::list_ptr(ListPtr p) { return Value(std::move(p)); }
Value Value::dict_view(std::vector<Value> items, const char* type_name) {
  auto p = std::make_shared<ListData>(std::move(items), false);
  p->view = type_name;
  return Value(std::move(p));
}
Value Value::new_dict() { return Value(std::make_shared<DictData>()); }
Value Value::dict_ptr(DictPtr p) { return Value(std::move(p)); }
Value Value::iterator(std::vector<Value> items, const char* type_name) {
  auto it = std::make_shared<IteratorData>();
  it->items = std::move(items);
  it->type_name = type_name;
  return Value(std::move(it));
}
Value Value::object(ObjectPtr p) { return Value(std::move(p)); }

Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j, 0); }
Value Value::from_json(const Json& j) { return value_from_json(j, 0); }

bool Value::is_tuple() const { return is_list() && list().tuple; }
bool Value::is_view() const { return is_list() && list().view != nullptr; }

double Value::to_double() const {
  switch (kind()) {
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    case Kind::kInt:
      return static_cast<double>(as_int());
    default:
      return as_float();
  }
}

const std::string& Value::str() const {
  const auto& p = std::get<Str>(v_).data;
  return p ? *p : empty_string();
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::kList:
      return list_ptr().get();
    case Kind::kDict:
      return dict_ptr().get();
    case Kind::kIterator:
      return std::get<IteratorPtr>(v_).get();
    case Kind::kObject:
      return object_ptr().get();
    default:
      return nullptr;
  }
}

void Value::fail_undefined() const {
  const UndefinedInfo* info = undefined_info();
  if (info == nullptr) raise("UndefinedError", "value is undefined");
  raise(info->security ? "SecurityError" : "UndefinedError", info->hint);
}

ListData::~ListData() {
  if (items.empty()) return;
  std::vector<Value> stack;
  drain_into(stack, items);
  destroy_iteratively(stack);
}

DictData::~DictData() {
  if (entries.empty()) return;
  std::vector<Value> stack;
  for (auto& [k, v] : entries) {
    stack.push_back(std::move(k));
    stack.push_back(std::move(v));
  }
  entries.clear();
  destroy_iteratively(stack);
}

void IteratorData::raise_error() const { throw Error(ErrorKind::kInvalidInput, error); }

IteratorData::~IteratorData() {
  if (items.empty()) return;
  std::vector<Value> stack;
  drain_into(stack, items);
  destroy_iteratively(stack);
}

namespace {
constexpr size_t kLinearDictSize = 16;  // dicts up to this size are searched linearly
}  // namespace

void DictData::update_index() const {
  if (indexed_ > entries.size()) {
    index_.clear();
    indexed_ = 0;
  }
  for (; indexed_ < entries.size(); ++indexed_)
    index_.emplace(hash_key(entries[indexed_].first), indexed_);
}

std::optional<size_t> DictData::index_of(const Value& key) const {
  if (entries.size() <= kLinearDictSize) {
    for (size_t i = 0; i < entries.size(); ++i)
      if (equals(entries[i].first, key)) return i;
    return std::nullopt;
  }
  update_index();
  auto [begin, end] = index_.equal_range(hash_key(key));
  for (auto it = begin; it != end; ++it)
    if (equals(entries[it->second].first, key)) return it->second;
  return std::nullopt;
}

std::optional<size_t> DictData::index_of(std::string_view key) const {
  if (entries.size() <= kLinearDictSize) {
    for (size_t i = 0; i < entries.size(); ++i) {
      const Value& k = entries[i].first;
      if (k.is_string() && k.str() == key) return i;
    }
    return std::nullopt;
  }
  update_index();
  auto [begin, end] = index_.equal_range(std::hash<std::string_view>()(key));
  for (auto it = begin; it != end; ++it) {
    const Value& k = entries[it->second].first;
    if (k.is_string() && k.str() == key) return it->second;
  }
  return std::nullopt;
}

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  auto i = index_of(key);
  return i ? &entries[*i].second : nullptr;
}

const Value* DictData::find(std::string_view key) const {
  auto i = index_of(key);
  return i ? &entries[*i].second : nullptr;
}

void DictData::set(Value key, Value value) {
  if (!is_hashable(key)) hash_key(key);  // raises the TypeError
  if (auto i = index_of(key)) {
    entries[*i].second = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool DictData::erase(const Value& key) {
  auto i = index_of(key);
  if (!i) return false;
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(*i));
  index_.clear();
  indexed_ = 0;
  return true;
}

std::pair<Value, Value> DictData::pop_last() {
  std::pair<Value, Value> last = std::move(entries.back());
  entries.pop_back();
  index_.clear();
  indexed_ = 0;
  return last;
}

void DictData::clear() {
  entries.clear();
  index_.clear();
  indexed_ = 0;
}

// ---- Object ----

std::string Object::repr() const { return fmt::format("<{} object>", type_name()); }

Value Object::call(Interpreter&, CallArgs&) {
  raise("TypeError", fmt::format("'{}' object is not callable", type_name()));
}

std::optional<Value> Object::get_attr(Interpreter&, std::string_view) { return std::nullopt; }

std::string Namespace::repr() const {
  std::string out = "<Namespace ";
  append_dict_repr(out, attrs, 1);
  return out + ">";
}

std::optional<Value> Namespace::get_attr(Interpreter&, std::string_view name) {
  if (const Value* v = attrs.find(name)) return *v;
  return std::nullopt;
}

void Namespace::drain(std::vector<Value>& out) {
  for (auto& [k, v] : attrs.entries) {
    out.push_back(std::move(k));
    out.push_back(std::move(v));
  }
  attrs.clear();
}

// ---- Python semantics ----

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return v.is_markup() ? "Markup" : "str";
    case Kind::kList:
      if (v.list().view != nullptr) return v.list().view;
      return v.list().tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kIterator:
      return v.iterator().type_name;
    case Kind::kObject:
      return v.object().type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_markup()) return "markupsafe.Markup object";
  if (v.is_object()) return fmt::format("jinja2.runtime.{} object", type_name(v));
  return fmt::format("{} object", type_name(v));
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.as_bool();
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_float() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
      return !v.list().items.empty();
    case Kind::kDict:
      return v.dict().size() != 0;
    default:
      return true;
  }
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Kind::kFloat:
      out += format_float(v.as_float());
      return;
    case Kind::kString:
      out += v.str();
      return;
    case Kind::kList:
      append_sequence_repr(out, v.list(), 0);
      return;
    case Kind::kDict:
      append_dict_repr(out, v.dict(), 0);
      return;
    case Kind::kIterator:
      out += fmt::format("<{} object>", v.iterator().type_name);
      return;
    case Kind::kObject:
      out += v.object().repr();
      return;
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

std::string repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : py::decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x80 ? (c < 0x20 || c == 0x7F) : !py::is_printable(c)) {
      if (c < 0x100) {
        out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
      } else if (c < 0x10000) {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
      } else {
        out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
      }
    } else {
      py::append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "-d.ddde+XX": split into sign, digits and exponent.
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int decpt = exponent + 1;
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

bool less_than(const Value& a, const Value& b) { return compare_at(a, b, "<", 0); }

bool compare(const Value& a, const Value& b, std::string_view op) {
  return compare_at(a, b, op, 0);
}

namespace {

bool is_hashable_at(const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::kList:
      if (!v.list().tuple || v.is_view()) return false;
      return std::all_of(v.list().items.begin(), v.list().items.end(),
                         [&](const Value& item) { return is_hashable_at(item, depth + 1); });
    case Kind::kDict:
      return false;
    default:
      return true;
  }
}

size_t hash_key_at(const Value& key, int depth) {
  check_depth(depth);
  switch (key.kind()) {
    case Kind::kNone:
      return 0x5bd1e995;
    case Kind::kUndefined:
      return 0x27d4eb2d;
    case Kind::kBool:
      return std::hash<int64_t>()(key.as_bool() ? 1 : 0);
    case Kind::kInt:
      return std::hash<int64_t>()(key.as_int());
    case Kind::kFloat: {
      double d = key.as_float();
      if (std::trunc(d) == d && std::abs(d) < 9.2e18)
        return std::hash<int64_t>()(static_cast<int64_t>(d));
      return std::hash<double>()(d);
    }
    case Kind::kString:
      return std::hash<std::string_view>()(key.str());
    case Kind::kList: {
      if (!key.list().tuple) break;
      size_t h = 0x345678;
      for (const Value& item : key.list().items) h = hash_combine(h, hash_key_at(item, depth + 1));
      return h;
    }
    case Kind::kDict:
      break;
    default:
      return std::hash<const void*>()(key.identity());
  }
  raise("TypeError", fmt::format("unhashable type: '{}'", type_name(key)));
}

}  // namespace

bool is_hashable(const Value& v) { return is_hashable_at(v, 0); }

size_t hash_key(const Value& key) { return hash_key_at(key, 0); }

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool is_iterable(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kList:
    case Kind::kDict:
    case Kind::kIterator:
      return true;
    default:
      return false;
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kString: {
      std::vector<Value> out;
      const std::string& s = v.str();
      if (py::is_ascii(s)) {
        out.reserve(s.size());
        for (char c : s) out.push_back(Value::string(std::string(1, c), v.is_markup()));
      } else {
        for (char32_t c : py::decode(s)) {
          std::string ch;
          py::append_utf8(ch, c);
          out.push_back(Value::string(std::move(ch), v.is_markup()));
        }
      }
      return out;
    }
    case Kind::kList:
      return v.list().items;
    case Kind::kDict: {
      std::vector<Value> out;
      out.reserve(v.dict().size());
      for (const auto& [k, val] : v.dict().entries) out.push_back(k);
      return out;
    }
    case Kind::kIterator: {
      IteratorData& it = v.iterator();
      if (!it.error.empty()) it.raise_error();
      std::vector<Value> out(it.items.begin() + static_cast<std::ptrdiff_t>(it.pos),
                             it.items.end());
      it.pos = it.items.size();
      return out;
    }
    default:
      raise("TypeError", fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

std::string dumps_json(const Value& v, const JsonDumpOptions& options) {
  JsonDumper dumper(options);
  std::string out;
  dumper.dump(out, v, 0);
  return out;
}

}  // namespace strata::text::jinja
