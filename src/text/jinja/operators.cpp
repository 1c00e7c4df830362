// Python's operators over Jinja values: arithmetic with Python's int/float rules (floor division,
// modulo sign, int ** int), str/list concatenation and repetition (with Markup escaping), `in`,
// slicing, and printf-style `str % args`.
#include <cmath>
#include <cstdio>

#include "text/jinja/interpreter.h"
#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  raise("TypeError", fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op),
                                 type_name(a), type_name(b)));
}

[[noreturn]] void overflow() { raise("OverflowError", "integer result does not fit in 64 bits"); }

int64_t as_integer(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

Value int_arith(BinaryOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) overflow();
      return Value::integer(r);
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) overflow();
      return Value::integer(r);
    case BinaryOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) overflow();
      return Value::integer(r);
    case BinaryOp::kDiv:
      if (b == 0) raise("ZeroDivisionError", "division by zero");
      return Value::number(static_cast<double>(a) / static_cast<double>(b));
    case BinaryOp::kFloorDiv: {
      if (b == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) overflow();
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return Value::integer(q);
    }
    case BinaryOp::kMod: {
      if (b == 0) raise("ZeroDivisionError", "integer modulo by zero");
      if (b == -1) return Value::integer(0);
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return Value::integer(m);
    }
    case BinaryOp::kPow: {
      if (b < 0) {
        if (a == 0) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
      }
      int64_t result = 1;
      int64_t base = a;
      while (b > 0) {
        if ((b & 1) != 0 && __builtin_mul_overflow(result, base, &result)) overflow();
        b >>= 1;
        if (b > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(result);
    }
  }
  return Value();
}

Value float_arith(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kAdd:
      return Value::number(a + b);
    case BinaryOp::kSub:
      return Value::number(a - b);
    case BinaryOp::kMul:
      return Value::number(a * b);
    case BinaryOp::kDiv:
      if (b == 0) raise("ZeroDivisionError", "float division by zero");
      return Value::number(a / b);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (b == 0) {
        raise("ZeroDivisionError",
              op == BinaryOp::kMod ? "float modulo" : "float floor division by zero");
      }
      // CPython's float divmod.
      double mod = std::fmod(a, b);
      double div = (a - mod) / b;
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) {
          mod += b;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, b);
      }
      if (op == BinaryOp::kMod) return Value::number(mod);
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, a / b);
      }
      return Value::number(floordiv);
    }
    case BinaryOp::kPow: {
      if (a == 0 && b < 0) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
      if (a < 0 && std::floor(b) != b) {
        raise("ValueError", "negative number cannot be raised to a fractional power");
      }
      double r = std::pow(a, b);
      if (std::isinf(r) && std::isfinite(a) && std::isfinite(b))
        raise("OverflowError", "(34, 'Numerical result out of range')");
      return Value::number(r);
    }
  }
  return Value();
}

Value repeat(Interpreter& interp, const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (s.empty() || times == 0) return Value::string("", seq.is_markup());
    interp.check_size(s.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return interp.make_string(std::move(out), seq.is_markup());
  }
  const auto& items = seq.list().items;
  if (items.empty()) times = 0;
  interp.check_size(items.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  interp.charge(out.size());
  return seq.list().tuple ? Value::new_tuple(std::move(out)) : Value::new_list(std::move(out));
}

Value add(Interpreter& interp, const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    if (a.is_markup() || b.is_markup()) {
      std::string left = a.is_markup() ? a.str() : escape_html(a.str());
      std::string right = b.is_markup() ? b.str() : escape_html(b.str());
      return interp.make_string(left + right, true);
    }
    interp.check_size(a.str().size() + b.str().size());
    return interp.make_string(a.str() + b.str());
  }
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple && !a.is_view() &&
      !b.is_view()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    interp.check_size(x.size() + y.size());
    interp.charge(x.size() + y.size());
    std::vector<Value> out;
    out.reserve(x.size() + y.size());
    out.insert(out.end(), x.begin(), x.end());
    out.insert(out.end(), y.begin(), y.end());
    return a.list().tuple ? Value::new_tuple(std::move(out)) : Value::new_list(std::move(out));
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_markup() || a.is_view()) unsupported(BinaryOp::kAdd, a, b);
  if (a.is_string() || a.is_list()) {
    raise("TypeError", fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(a),
                                   type_name(b), type_name(a)));
  }
  unsupported(BinaryOp::kAdd, a, b);
}

}  // namespace

Value binary_op(Interpreter& interp, BinaryOp op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_arith(op, a.to_double(), b.to_double());
    return int_arith(op, as_integer(a), as_integer(b));
  }
  switch (op) {
    case BinaryOp::kAdd:
      return add(interp, a, b);
    case BinaryOp::kMul:
      if ((a.is_string() || (a.is_list() && !a.is_view())) && (b.is_int() || b.is_bool()))
        return repeat(interp, a, as_integer(b));
      if ((b.is_string() || (b.is_list() && !b.is_view())) && (a.is_int() || a.is_bool()))
        return repeat(interp, b, as_integer(a));
      break;
    case BinaryOp::kMod:
      if (a.is_string() && !b.is_undefined()) {
        return interp.make_string(percent_format(interp, a.str(), b, a.is_markup()), a.is_markup());
      }
      break;
    default:
      break;
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  unsupported(op, a, b);
}

Value unary_minus(const Value& v, bool negate) {
  if (v.is_int() || v.is_bool()) {
    int64_t i = as_integer(v);
    if (!negate) return Value::integer(i);
    if (i == INT64_MIN) overflow();
    return Value::integer(-i);
  }
  if (v.is_float()) return Value::number(negate ? -v.as_float() : v.as_float());
  if (v.is_undefined()) v.fail_undefined();
  raise("TypeError",
        fmt::format("bad operand type for unary {}: '{}'", negate ? '-' : '+', type_name(v)));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string()) {
        raise("TypeError", fmt::format("'in <string>' requires string as left operand, not {}",
                                       type_name(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.list().items)
        if (equals(v, item)) return true;
      return false;
    case Kind::kDict:
      if (!is_hashable(item)) hash_key(item);  // raises TypeError: unhashable type
      return container.dict().find(item) != nullptr;
    case Kind::kIterator: {
      IteratorData& it = container.iterator();
      while (it.pos < it.items.size()) {
        if (equals(it.items[it.pos++], item)) return true;
      }
      if (!it.error.empty()) it.raise_error();
      return false;
    }
    default:
      raise("TypeError",
            fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

Value slice_value(Interpreter& interp, const Value& obj, const Value& start, const Value& stop,
                  const Value& step) {
  if (obj.is_undefined()) obj.fail_undefined();
  auto index = [](const Value& v, std::optional<int64_t>& out) {
    if (v.is_none()) return true;
    if (v.is_int() || v.is_bool()) {
      out = as_integer(v);
      return true;
    }
    return false;
  };
  // Jinja compiles slices to a plain Python subscript (bypassing getitem), so misuse raises.
  if (obj.is_dict()) raise("TypeError", "unhashable type: 'slice'");
  if (!(obj.is_string() || obj.is_list()) || obj.is_view()) {
    raise("TypeError", fmt::format("'{}' object is not subscriptable", type_name(obj)));
  }
  std::optional<int64_t> a, b, c;
  if (!(index(start, a) && index(stop, b) && index(step, c))) {
    raise("TypeError", "slice indices must be integers or None or have an __index__ method");
  }
  if (c && *c == 0) raise("ValueError", "slice step cannot be zero");
  if (obj.is_list()) {
    const auto& items = obj.list().items;
    auto s = py::slice_indices(static_cast<int64_t>(items.size()), a, b, c);
    std::vector<Value> out;
    out.reserve(static_cast<size_t>(s.count));
    for (int64_t i = 0, k = s.start; i < s.count; ++i, k += s.step)
      out.push_back(items[static_cast<size_t>(k)]);
    interp.charge(out.size());
    return obj.list().tuple ? Value::new_tuple(std::move(out)) : Value::new_list(std::move(out));
  }
  const std::string& str = obj.str();
  std::string out;
  if (py::is_ascii(str)) {
    auto s = py::slice_indices(static_cast<int64_t>(str.size()), a, b, c);
    if (s.step == 1) {
      out = str.substr(static_cast<size_t>(s.start), static_cast<size_t>(s.count));
    } else {
      for (int64_t i = 0, k = s.start; i < s.count; ++i, k += s.step)
        out += str[static_cast<size_t>(k)];
    }
  } else {
    std::u32string cps = py::decode(str);
    auto s = py::slice_indices(static_cast<int64_t>(cps.size()), a, b, c);
    for (int64_t i = 0, k = s.start; i < s.count; ++i, k += s.step)
      py::append_utf8(out, cps[static_cast<size_t>(k)]);
  }
  return interp.make_string(std::move(out), obj.is_markup());
}

std::string percent_format(Interpreter& interp, const std::string& format, const Value& args,
                           bool escape) {
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.list().items;
  } else {
    if (args.is_dict()) mapping = &args.dict();
    positional.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i >= format.size()) raise("ValueError", "incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) raise("ValueError", "incomplete format key");
      if (mapping == nullptr) raise("TypeError", "format requires a mapping");
      arg = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (arg == nullptr) {
        raise("KeyError", repr_string(format.substr(i + 1, close - i - 1)));
      }
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos)
      flags += format[i++];
    auto read_number = [&]() -> std::string {
      std::string n;
      if (i < format.size() && format[i] == '*') {
        if (next >= positional.size()) raise("TypeError", "not enough arguments for format string");
        int64_t v = int_arg(positional[next++], "* width");
        if (v < 0) {
          flags += '-';  // Python: a negative * width left-justifies
          v = v == INT64_MIN ? INT64_MAX : -v;
        }
        n = std::to_string(v);
        ++i;
        return n;
      }
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') n += format[i++];
      return n;
    };
    std::string width = read_number();
    std::string precision;
    bool has_precision = false;
    if (i < format.size() && format[i] == '.') {
      ++i;
      has_precision = true;
      precision = read_number();
      if (precision.empty()) precision = "0";
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) raise("ValueError", "incomplete format");
    char type = format[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (arg == nullptr) {
      if (next >= positional.size()) raise("TypeError", "not enough arguments for format string");
      arg = &positional[next++];
    }
    if (width.size() > 6 || precision.size() > 6) raise("ValueError", "format width too large");
    std::string spec = "%" + flags + width + (has_precision ? "." + precision : "");
    char buf[512];
    std::string piece;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = type == 's' ? to_str(*arg) : repr(*arg);
        if (escape && !(type == 's' && arg->is_markup())) s = escape_html(s);
        if (has_precision) s = py::encode(py::decode(s).substr(0, std::stoul(precision)));
        size_t w = width.empty() ? 0 : std::stoul(width);
        size_t len = py::length(s);
        if (len < w) {
          std::string pad(w - len, ' ');
          s = flags.find('-') != std::string::npos ? s + pad : pad + s;
        }
        piece = std::move(s);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'c': {
        if (!arg->is_number()) {
          raise("TypeError", fmt::format("%{} format: a real number is required, not {}", type,
                                         type_name(*arg)));
        }
        auto v = static_cast<long long>(arg->is_float() ? std::trunc(arg->as_float())
                                                        : static_cast<double>(as_integer(*arg)));
        if (arg->is_int()) v = arg->as_int();
        if (type == 'c') {
          if (v < 0 || v > 0x10FFFF) raise("OverflowError", "%c arg not in range(0x110000)");
          piece.clear();
          py::append_utf8(piece, static_cast<char32_t>(v));
          break;
        }
        char t = type == 'i' || type == 'u' ? 'd' : type;
        std::snprintf(buf, sizeof(buf), (spec + "ll" + t).c_str(), v);
        piece = buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) {
          raise("TypeError", fmt::format("must be real number, not {}", type_name(*arg)));
        }
        std::snprintf(buf, sizeof(buf), (spec + type).c_str(), arg->to_double());
        piece = buf;
        break;
      }
      default:
        raise("ValueError", fmt::format("unsupported format character '{}'", type));
    }
    out += piece;
    interp.check_size(out.size());
  }
  // Like CPython, leftover arguments are only an error when the argument is not subscriptable.
  bool subscriptable = args.is_dict() || (args.is_list() && !args.is_tuple());
  if (!used_mapping && !subscriptable && next < positional.size()) {
    raise("TypeError", "not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace strata::text::jinja
