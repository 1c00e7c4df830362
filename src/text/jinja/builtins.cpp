// Global functions a template can call: Jinja2's range (with the sandbox's 100000-item cap),
// dict, namespace, cycler and joiner, and HF's raise_exception and strftime_now.
#include <ctime>
#include <functional>

#include "text/jinja/interpreter.h"

namespace strata::text::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

class NativeFunction : public Object {
 public:
  NativeFunction(std::string name, NativeFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return fmt::format("<built-in function {}>", name_); }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, args); }

 private:
  std::string name_;
  NativeFn fn_;
};

Value native(std::string name, NativeFn fn) {
  return Value::object(std::make_shared<NativeFunction>(std::move(name), std::move(fn)));
}

void no_keywords(std::string_view function, const CallArgs& args) {
  if (!args.keyword.empty())
    raise("TypeError", fmt::format("{}() takes no keyword arguments", function));
}

Value range(Interpreter& interp, CallArgs& args) {
  no_keywords("range", args);
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    raise("TypeError", fmt::format("range expected 1 to 3 arguments, got {}", p.size()));
  }
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0], "range");
  } else {
    start = int_arg(p[0], "range");
    stop = int_arg(p[1], "range");
    if (p.size() == 3) step = int_arg(p[2], "range");
  }
  if (step == 0) raise("ValueError", "range() arg 3 must not be zero");
  __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (count > kMaxRange) {
    raise("OverflowError",
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  interp.charge(static_cast<size_t>(count));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    out.push_back(Value::integer(start + i * step));
  return Value::new_list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs), also the argument rules of namespace().
void fill_dict(Interpreter& interp, DictData& d, CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1) {
    raise("TypeError",
          fmt::format("{} expected at most 1 argument, got {}", function, args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.dict().entries) d.set(k, v);
    } else {
      for (const Value& pair : iterate(source)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) {
          raise("ValueError", fmt::format("dictionary update sequence element has length {}; 2 "
                                          "is required",
                                          kv.size()));
        }
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  interp.charge(d.size());
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  const char* type_name() const override { return "Cycler"; }
  std::optional<Value> get_attr(Interpreter&, std::string_view name) override {
    if (name == "current") return items_[pos_];
    if (name == "items") return Value::new_list(items_);
    auto self = shared_from_this();
    if (name == "next") {
      return native("next", [self](Interpreter&, CallArgs&) {
        Value v = self->items_[self->pos_];
        self->pos_ = (self->pos_ + 1) % self->items_.size();
        return v;
      });
    }
    if (name == "reset") {
      return native("reset", [self](Interpreter&, CallArgs&) {
        self->pos_ = 0;
        return Value::none();
      });
    }
    return std::nullopt;
  }
  void drain(std::vector<Value>& out) override {
    for (Value& v : items_) out.push_back(std::move(v));
    items_.assign(1, Value::none());
  }

 private:
  std::vector<Value> items_;
  size_t pos_ = 0;
};

std::string strftime_now(const Options& options, const std::string& format) {
  if (format.size() > 1024) raise("ValueError", "strftime format too long");
  std::tm tm{};
  if (options.now) {
    tm = options.now();
    std::tm copy = tm;
    std::time_t t = timegm(&copy);  // normalizes the fields and fills in weekday and year day
    gmtime_r(&t, &tm);
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (format.empty()) return "";
  std::string buf(format.size() * 16 + 256, '\0');
  // A leading marker tells an empty result apart from a too-small buffer.
  std::string marked = "\x01" + format;
  size_t n = std::strftime(buf.data(), buf.size(), marked.c_str(), &tm);
  if (n == 0) raise("ValueError", "strftime result too long");
  return buf.substr(1, n - 1);
}

}  // namespace

void add_globals(Scope& scope) {
  scope.set("range", native("range", range));
  scope.set("dict", native("dict", [](Interpreter& interp, CallArgs& args) {
              Value d = Value::new_dict();
              fill_dict(interp, d.dict(), args, "dict");
              return d;
            }));
  scope.set("namespace", native("namespace", [](Interpreter& interp, CallArgs& args) {
              auto ns = std::make_shared<Namespace>();
              fill_dict(interp, ns->attrs, args, "namespace");
              Value v = Value::object(ns);
              interp.track(v);
              return v;
            }));
  scope.set("cycler", native("cycler", [](Interpreter& interp, CallArgs& args) {
              no_keywords("cycler", args);
              if (args.positional.empty())
                raise("RuntimeError", "at least one item has to be provided");
              Value v = Value::object(std::make_shared<Cycler>(args.positional));
              interp.track(v);
              return v;
            }));
  scope.set("joiner", native("joiner", [](Interpreter&, CallArgs& args) {
              auto a = bind_args("joiner", args, {"sep"});
              std::string sep = a[0] ? to_str(*a[0]) : ", ";
              auto used = std::make_shared<bool>(false);
              return native("joiner", [sep, used](Interpreter&, CallArgs&) {
                if (!*used) {
                  *used = true;
                  return Value::string("");
                }
                return Value::string(sep);
              });
            }));
  scope.set("lipsum", native("lipsum", [](Interpreter&, CallArgs&) -> Value {
              raise("TemplateRuntimeError", "lipsum() is not supported by strata");
            }));
  scope.set("raise_exception", native("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
              auto a = bind_args("raise_exception", args, {"message"});
              raise("TemplateError", a[0] ? to_str(*a[0]) : "");
            }));
  scope.set("strftime_now", native("strftime_now", [](Interpreter& interp, CallArgs& args) {
              auto a = bind_args("strftime_now", args, {"format"});
              if (!a[0] || !a[0]->is_string())
                raise("TypeError", "strftime_now() argument must be str");
              return Value::string(strftime_now(interp.options(), a[0]->str()));
            }));
}

}  // namespace strata::text::jinja
