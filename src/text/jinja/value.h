// Values of the Jinja engine: Python's dynamic values (None, bool, int, float, str and Markup,
// list, tuple, dict, iterators, undefined, and objects such as macros and namespaces) with Python's
// reference semantics for containers, plus the Python operations every other part needs.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/json.h"

namespace strata::text::jinja {

class Value;
class Interpreter;

// Throws strata::Error (kInvalidInput) with a Python-like message "<type>: <message>".
[[noreturn]] void raise(std::string_view py_type, const std::string& message);

// What an undefined value says when it is used in a way that needs a value.
struct UndefinedInfo {
  std::string hint;       // e.g. "'x' is undefined"
  bool security = false;  // an unsafe attribute (SecurityError rather than UndefinedError)
};

struct Undefined {
  std::shared_ptr<const UndefinedInfo> info;
};
struct None {};

// An immutable string shared between copies; `markup` is markupsafe's Markup (from |safe), whose
// `+` escapes the plain string it is added to.
struct Str {
  std::shared_ptr<const std::string> data;
  bool markup = false;
};

struct ListData;
struct DictData;
struct IteratorData;
class Object;
using ListPtr = std::shared_ptr<ListData>;
using DictPtr = std::shared_ptr<DictData>;
using IteratorPtr = std::shared_ptr<IteratorData>;
using ObjectPtr = std::shared_ptr<Object>;

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list or tuple
  kDict,
  kIterator,  // a one-shot Python iterator (generator, reversed(...), dict items iterator)
  kObject,    // macros, functions, bound methods, namespaces, loop objects, ...
};

class Value {
 public:
  Value() : v_(Undefined{}) {}

  static Value undefined() { return Value(); }
  static Value undefined(std::string hint, bool security = false);
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s, bool markup = false);
  static Value string_ref(std::shared_ptr<const std::string> s, bool markup = false);
  static Value new_list(std::vector<Value> items = {});
  static Value new_tuple(std::vector<Value> items = {});
  static Value list_ptr(ListPtr p);
  static Value new_dict();
  static Value dict_ptr(DictPtr p);
  static Value dict_view(std::vector<Value> items, const char* type_name);
  static Value iterator(std::vector<Value> items, const char* type_name = "generator");
  static Value object(ObjectPtr p);

  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const Json& j);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python's numbers.Number
  bool is_string() const { return kind() == Kind::kString; }
  bool is_markup() const { return is_string() && std::get<Str>(v_).markup; }
  bool is_list() const { return kind() == Kind::kList; }  // list or tuple
  bool is_tuple() const;
  bool is_view() const;  // a dict view (see ListData::view)
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_iterator() const { return kind() == Kind::kIterator; }
  bool is_object() const { return kind() == Kind::kObject; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double to_double() const;  // int, float or bool as a double
  const std::string& str() const;
  const std::shared_ptr<const std::string>& str_ref() const { return std::get<Str>(v_).data; }
  ListData& list() const { return *std::get<ListPtr>(v_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(v_); }
  DictData& dict() const { return *std::get<DictPtr>(v_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(v_); }
  IteratorData& iterator() const { return *std::get<IteratorPtr>(v_); }
  Object& object() const { return *std::get<ObjectPtr>(v_); }
  const ObjectPtr& object_ptr() const { return std::get<ObjectPtr>(v_); }
  const UndefinedInfo* undefined_info() const { return std::get<Undefined>(v_).info.get(); }

  // Identity of a container or object (for `is sameas` and cycle checks); null for scalars.
  const void* identity() const;

  // Raises the UndefinedError (or SecurityError) this undefined value carries.
  [[noreturn]] void fail_undefined() const;

 private:
  template <typename T>
  explicit Value(T v) : v_(std::move(v)) {}

  std::variant<Undefined, None, bool, int64_t, double, Str, ListPtr, DictPtr, IteratorPtr,
               ObjectPtr>
      v_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  // Set for dict.keys()/values()/items() results: iterable and sized like Python's dict views,
  // but not subscriptable, printed as e.g. "dict_keys([...])" and not JSON serializable.
  const char* view = nullptr;
  ListData() = default;
  ListData(std::vector<Value> v, bool is_tuple) : items(std::move(v)), tuple(is_tuple) {}
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  ~ListData();  // iterative, so deeply nested values cannot overflow the stack
};

// An insertion-ordered dict keyed by hashable values (str, int, float, bool, None, tuple).
// Small dicts are searched linearly; larger ones keep a hash index. Read `entries` freely, but
// change them only through the methods, which keep the index valid.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;

  DictData() = default;
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;
  ~DictData();

  size_t size() const { return entries.size(); }
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // raises TypeError for an unhashable key
  bool erase(const Value& key);
  std::pair<Value, Value> pop_last();  // the dict must not be empty
  void clear();

 private:
  std::optional<size_t> index_of(const Value& key) const;
  std::optional<size_t> index_of(std::string_view key) const;
  void update_index() const;

  mutable std::unordered_multimap<size_t, size_t> index_;  // key hash -> position in entries
  mutable size_t indexed_ = 0;                             // entries [0, indexed_) are indexed
};

struct IteratorData {
  std::vector<Value> items;
  size_t pos = 0;
  const char* type_name = "generator";
  // Python generators run lazily: an error in producing them surfaces only when consumed. The
  // items are produced eagerly, so such an error is kept here and raised on consumption.
  std::string error;
  [[noreturn]] void raise_error() const;
  ~IteratorData();
};

// Arguments of a call: positional then keyword, in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Everything that is not plain data: callables, namespaces, loop objects.
class Object {
 public:
  virtual ~Object() = default;
  virtual const char* type_name() const = 0;  // Python class name
  virtual std::string repr() const;
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args);
  // The attribute `name`, or nullopt when the object has none.
  virtual std::optional<Value> get_attr(Interpreter& interp, std::string_view name);
  // Moves contained values out (to break reference cycles at the end of a render).
  virtual void drain(std::vector<Value>& /*out*/) {}
};

// Python's namespace object from `namespace(...)`: the one object whose attributes `set` assigns.
class Namespace : public Object {
 public:
  DictData attrs;
  const char* type_name() const override { return "Namespace"; }
  std::string repr() const override;
  std::optional<Value> get_attr(Interpreter& interp, std::string_view name) override;
  void drain(std::vector<Value>& out) override;
};

// ---- Python semantics over values (value.cpp) ----

const char* type_name(const Value& v);         // Python's type(v).__name__: 'str', 'NoneType', ...
std::string object_type_repr(const Value& v);  // Jinja's object_type_repr: "dict object", "None"
bool truthy(const Value& v);
std::string to_str(const Value& v);  // Python str(v); undefined is ""
void append_str(std::string& out, const Value& v);
std::string repr(const Value& v);
std::string repr_string(std::string_view s);  // Python repr of a str
std::string format_float(double d);           // Python repr of a float
bool equals(const Value& a, const Value& b);
// Python's <, <=, >, >= (op is one of "<", "<=", ">", ">="); raises TypeError when unordered.
bool less_than(const Value& a, const Value& b);
bool compare(const Value& a, const Value& b, std::string_view op);
size_t hash_key(const Value& key);  // raises TypeError for unhashable values
bool is_hashable(const Value& v);
std::string escape_html(std::string_view s);  // markupsafe.escape

// Iterates a value the way Python's iter() does (str by code point, dict by key, iterators are
// consumed); undefined iterates as empty. Raises TypeError for non-iterables.
std::vector<Value> iterate(const Value& v);
bool is_iterable(const Value& v);

// Python's json.dumps with HF's defaults (ensure_ascii=False); indent < 0 means None; indent_str
// overrides the indent when set (json.dumps accepts a string indent).
struct JsonDumpOptions {
  int indent = -1;
  std::optional<std::string> indent_str;
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string dumps_json(const Value& v, const JsonDumpOptions& options);

}  // namespace strata::text::jinja
