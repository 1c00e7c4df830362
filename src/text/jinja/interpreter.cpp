// The tree-walking renderer (see interpreter.h): statements write to the current output buffer,
// expressions evaluate to Values with Jinja2's sandboxed attribute and item lookup, and every
// loop, call and allocation is checked against the render's limits.
#include "text/jinja/interpreter.h"

#include <algorithm>
#include <exception>

#include "text/jinja/filters.h"
#include "text/jinja/pystring.h"

namespace strata::text::jinja {
namespace {

class MacroObject : public Object {
 public:
  MacroObject(const MacroDef& def, ScopePtr closure) : def_(def), closure_(std::move(closure)) {}
  const char* type_name() const override { return "Macro"; }
  std::string repr() const override {
    return def_.name.empty() ? "<Macro anonymous>" : fmt::format("<Macro '{}'>", def_.name);
  }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override {
    return interp.invoke_macro(def_, closure_, args);
  }
  std::optional<Value> get_attr(Interpreter&, std::string_view name) override {
    if (name == "name") return Value::string(def_.name);
    if (name == "arguments") {
      std::vector<Value> names;
      for (const auto& p : def_.params) names.push_back(Value::string(p));
      return Value::new_tuple(std::move(names));
    }
    if (name == "catch_kwargs") return Value::boolean(def_.uses_kwargs);
    if (name == "catch_varargs") return Value::boolean(def_.uses_varargs);
    if (name == "caller") return Value::boolean(def_.uses_caller);
    return std::nullopt;
  }

 private:
  const MacroDef& def_;
  ScopePtr closure_;
};

// Jinja's LoopContext: one per loop, updated as the loop advances.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(std::vector<Value> items, int depth, const ForStmt& node, ScopePtr scope)
      : items_(std::move(items)), depth_(depth), node_(node), scope_(std::move(scope)) {}

  void set_index(size_t i) { index_ = i; }
  const char* type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return fmt::format("<LoopContext {}/{}>", index_ + 1, items_.size());
  }
  bool is_callable() const override { return true; }

  Value call(Interpreter& interp, CallArgs& args) override {
    if (!node_.recursive) {
      raise("TypeError",
            "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
    }
    if (args.positional.size() != 1 || !args.keyword.empty())
      raise("TypeError", "loop() takes exactly one argument");
    return interp.render_recursive_loop(node_, scope_, args.positional[0], depth_ + 1);
  }

  std::optional<Value> get_attr(Interpreter&, std::string_view name) override {
    auto n = static_cast<int64_t>(items_.size());
    auto i = static_cast<int64_t>(index_);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(depth_);
    if (name == "depth0") return Value::integer(depth_ - 1);
    if (name == "previtem") {
      return i > 0 ? items_[index_ - 1] : Value::undefined("there is no previous item");
    }
    if (name == "nextitem") {
      return i + 1 < n ? items_[index_ + 1] : Value::undefined("there is no next item");
    }
    if (name == "cycle" || name == "changed") {
      return Value::object(std::make_shared<LoopMethod>(shared_from_this(), name == "cycle"));
    }
    return std::nullopt;
  }

  void drain(std::vector<Value>& out) override {
    for (Value& v : items_) out.push_back(std::move(v));
    items_.clear();
    if (last_changed_) out.push_back(std::move(*last_changed_));
    scope_.reset();
  }

 private:
  class LoopMethod : public Object {
   public:
    LoopMethod(std::shared_ptr<LoopObject> loop, bool cycle)
        : loop_(std::move(loop)), cycle_(cycle) {}
    const char* type_name() const override { return "method"; }
    bool is_callable() const override { return true; }
    Value call(Interpreter&, CallArgs& args) override {
      if (cycle_) {
        if (args.positional.empty()) raise("TypeError", "no items for cycling given");
        return args.positional[loop_->index_ % args.positional.size()];
      }
      Value current = Value::new_tuple(args.positional);
      if (loop_->last_changed_ && equals(*loop_->last_changed_, current))
        return Value::boolean(false);
      loop_->last_changed_ = std::move(current);
      return Value::boolean(true);
    }

   private:
    std::shared_ptr<LoopObject> loop_;
    bool cycle_;
  };

  std::vector<Value> items_;
  size_t index_ = 0;
  int depth_;
  const ForStmt& node_;
  ScopePtr scope_;
  std::optional<Value> last_changed_;
};

[[noreturn]] void unsafe_access(const Value& obj, std::string_view name) {
  raise("SecurityError",
        fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)));
}

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value missing_element(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), repr(key)));
}

}  // namespace

// ---- Scope ----

const Value* Scope::lookup(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

// ---- helpers ----

class Interpreter::OutputCapture {
 public:
  explicit OutputCapture(Interpreter& interp)
      : interp_(interp), saved_(interp.out_), buffer_(std::make_unique<std::string>()) {
    interp.out_ = buffer_.get();
  }
  ~OutputCapture() { interp_.out_ = saved_; }
  std::string take() { return std::move(*buffer_); }

 private:
  Interpreter& interp_;
  std::string* saved_;
  std::unique_ptr<std::string> buffer_;  // on the heap, so out_ never points into a stack frame
};

class Interpreter::DepthGuard {
 public:
  explicit DepthGuard(Interpreter& interp)
      : interp_(interp), line_(interp.line_), exceptions_(std::uncaught_exceptions()) {
    if (++interp.call_depth_ > interp.options_.max_recursion_depth) {
      --interp.call_depth_;
      raise("RecursionError", fmt::format("maximum recursion depth exceeded ({} nested calls)",
                                          interp.options_.max_recursion_depth));
    }
  }
  ~DepthGuard() {
    --interp_.call_depth_;
    // On an error, keep the line where it happened rather than the call site.
    if (std::uncaught_exceptions() == exceptions_) interp_.line_ = line_;
  }

 private:
  Interpreter& interp_;
  int line_;
  int exceptions_;
};

Interpreter::Interpreter(const Options& options) : options_(options) {}

Interpreter::~Interpreter() {
  // Empty everything that may be part of a reference cycle, then let it all go iteratively.
  std::vector<Value> sink;
  for (Value& v : tracked_) {
    if (v.is_list()) {
      for (Value& item : v.list().items) sink.push_back(std::move(item));
      v.list().items.clear();
    } else if (v.is_dict()) {
      for (auto& [k, val] : v.dict().entries) {
        sink.push_back(std::move(k));
        sink.push_back(std::move(val));
      }
      v.dict().clear();
    } else if (v.is_object()) {
      v.object().drain(sink);
    }
  }
  for (const ScopePtr& s : closure_scopes_) {
    for (auto& [k, v] : s->vars) sink.push_back(std::move(v));
    s->vars.clear();
  }
  tracked_.clear();
  closure_scopes_.clear();
  ListData drained(std::move(sink), false);  // its destructor frees nested values iteratively
}

std::string Interpreter::render(const Body& body, const ScopePtr& root) {
  stack_base_ = static_cast<const char*>(__builtin_frame_address(0));
  std::string output;
  out_ = &output;
  try {
    exec_body(body, std::make_shared<Scope>(root));
  } catch (const Error& e) {
    if (line_ > 0) throw Error(e.kind(), fmt::format("{} (template line {})", e.what(), line_));
    throw;
  }
  out_ = nullptr;
  return output;
}

void Interpreter::charge(size_t units) {
  operations_ += units;
  if (operations_ > options_.max_operations) {
    raise("RuntimeError",
          fmt::format("template exceeded the operation limit ({})", options_.max_operations));
  }
}

void Interpreter::check_size(size_t size) const {
  if (size > options_.max_output_bytes) {
    raise("MemoryError",
          fmt::format("value of size {} exceeds the limit ({})", size, options_.max_output_bytes));
  }
}

Value Interpreter::make_string(std::string s, bool markup) {
  check_size(s.size());
  charge(s.size() / 64);
  return Value::string(std::move(s), markup);
}

void Interpreter::track(const Value& v) {
  if (v.is_list() || v.is_dict() || v.is_object()) tracked_.push_back(v);
}

void Interpreter::check_stack() {
  const auto* here = static_cast<const char*>(__builtin_frame_address(0));
  size_t used = stack_base_ > here ? static_cast<size_t>(stack_base_ - here)
                                   : static_cast<size_t>(here - stack_base_);
  if (used > options_.max_stack_bytes) {
    raise("RecursionError", "template nesting exceeds the stack limit");
  }
}

void Interpreter::write(std::string_view text) {
  if (out_->size() + text.size() > options_.max_output_bytes) {
    raise("RuntimeError",
          fmt::format("output exceeds the limit of {} bytes", options_.max_output_bytes));
  }
  charge(text.size() / 64);
  out_->append(text);
}

std::string Interpreter::capture_body(const Body& body, const ScopePtr& scope) {
  OutputCapture capture(*this);
  exec_body(body, scope);
  return capture.take();
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& stmt : body) {
    Flow flow = exec(*stmt, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const ScopePtr& scope) {
  check_stack();
  line_ = stmt.line;
  switch (stmt.kind) {
    case StmtKind::kText:
      write(static_cast<const TextStmt&>(stmt).text);
      return Flow::kNormal;
    case StmtKind::kOutput: {
      Value v = eval(*static_cast<const OutputStmt&>(stmt).expr, scope);
      if (v.is_string()) {
        write(v.str());
      } else {
        write(to_str(v));
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      const auto& node = static_cast<const IfStmt&>(stmt);
      for (const auto& [test, body] : node.branches) {
        if (truthy(eval(*test, scope))) return exec_body(body, scope);
      }
      return exec_body(node.else_body, scope);
    }
    case StmtKind::kFor: {
      const auto& node = static_cast<const ForStmt&>(stmt);
      exec_for(node, scope, eval(*node.iter, scope), 1);
      return Flow::kNormal;
    }
    case StmtKind::kSet: {
      const auto& node = static_cast<const SetStmt&>(stmt);
      assign(node.target, eval(*node.value, scope), scope);
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& node = static_cast<const SetBlockStmt&>(stmt);
      Value v = make_string(capture_body(node.body, std::make_shared<Scope>(scope)));
      assign(node.target, apply_filters(node.filters, std::move(v), scope), scope);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& node = static_cast<const MacroStmt&>(stmt);
      scope->set(node.def.name, Value::object(std::make_shared<MacroObject>(node.def, scope)));
      closure_scopes_.push_back(scope);
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      const auto& node = static_cast<const CallBlockStmt&>(stmt);
      Value callee = eval(*node.call->callee, scope);
      CallArgs args = eval_args(node.call->args, scope);
      closure_scopes_.push_back(scope);
      args.keyword.emplace_back("caller",
                                Value::object(std::make_shared<MacroObject>(node.caller, scope)));
      Value result = call(callee, args);
      write(to_str(result));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const auto& node = static_cast<const FilterBlockStmt&>(stmt);
      Value v = make_string(capture_body(node.body, std::make_shared<Scope>(scope)));
      write(to_str(apply_filters(node.filters, std::move(v), scope)));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& node = static_cast<const WithStmt&>(stmt);
      auto inner = std::make_shared<Scope>(scope);
      for (const auto& [target, expr] : node.assignments) assign(target, eval(*expr, scope), inner);
      return exec_body(node.body, inner);
    }
    case StmtKind::kScope:
      return exec_body(static_cast<const ScopeStmt&>(stmt).body, std::make_shared<Scope>(scope));
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const ForStmt& node, const ScopePtr& scope, const Value& iterable,
                           int depth) {
  std::vector<Value> items = iterate(iterable);
  charge(items.size());
  if (node.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto test_scope = std::make_shared<Scope>(scope);
      assign(node.target, item, test_scope);
      if (truthy(eval(*node.filter, test_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!node.else_body.empty()) exec_body(node.else_body, std::make_shared<Scope>(scope));
    return;
  }
  auto loop = std::make_shared<LoopObject>(items, depth, node, scope);
  Value loop_value = Value::object(loop);
  for (size_t i = 0; i < items.size(); ++i) {
    if (++loop_iterations_ > options_.max_loop_iterations) {
      raise("RuntimeError",
            fmt::format("loop iteration limit exceeded ({})", options_.max_loop_iterations));
    }
    charge(1);
    auto iteration = std::make_shared<Scope>(scope);
    assign(node.target, items[i], iteration);
    iteration->set("loop", loop_value);
    loop->set_index(i);
    if (exec_body(node.body, iteration) == Flow::kBreak) break;
  }
}

Value Interpreter::render_recursive_loop(const ForStmt& node, const ScopePtr& scope,
                                         const Value& iterable, int depth) {
  DepthGuard guard(*this);
  OutputCapture capture(*this);
  exec_for(node, scope, iterable, depth);
  return make_string(capture.take());
}

void Interpreter::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::kName:
      scope->set(target.name, value);
      return;
    case Target::Kind::kTuple: {
      if (!is_iterable(value)) {
        raise("TypeError", fmt::format("cannot unpack non-iterable {} object", type_name(value)));
      }
      std::vector<Value> items = iterate(value);
      size_t n = target.items.size();
      if (items.size() < n) {
        raise("ValueError",
              fmt::format("not enough values to unpack (expected {}, got {})", n, items.size()));
      }
      if (items.size() > n) {
        raise("ValueError", fmt::format("too many values to unpack (expected {})", n));
      }
      for (size_t i = 0; i < n; ++i) assign(target.items[i], items[i], scope);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = scope->lookup(target.name);
      if (ns == nullptr || !ns->is_object() || dynamic_cast<Namespace*>(&ns->object()) == nullptr) {
        raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      }
      static_cast<Namespace&>(ns->object()).attrs.set(Value::string(target.attr), value);
      return;
    }
  }
}

Value Interpreter::apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters,
                                 Value value, const ScopePtr& scope) {
  for (const auto& f : filters) value = eval_filter(*f, std::move(value), scope);
  return value;
}

// ---- macros ----

Value Interpreter::invoke_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args) {
  DepthGuard guard(*this);
  auto scope = std::make_shared<Scope>(closure);
  const auto& positional = args.positional;
  size_t n = def.params.size();
  std::vector<std::optional<Value>> bound(n);
  for (size_t i = 0; i < std::min(n, positional.size()); ++i) bound[i] = positional[i];
  std::vector<std::pair<std::string, Value>> extra;
  bool found_caller = false;
  for (auto& [key, value] : args.keyword) {
    auto it = std::find(def.params.begin(), def.params.end(), key);
    auto index = static_cast<size_t>(it - def.params.begin());
    if (it != def.params.end() && index >= positional.size()) {
      bound[index] = value;
      if (key == "caller") found_caller = true;
    } else {
      extra.emplace_back(key, value);
    }
  }
  Value caller = Value::undefined("No caller defined");
  if (def.uses_caller && !found_caller) {
    auto it =
        std::find_if(extra.begin(), extra.end(), [](auto& kv) { return kv.first == "caller"; });
    if (it != extra.end()) {
      caller = it->second;
      extra.erase(it);
    }
  }
  if (!def.uses_kwargs && !extra.empty()) {
    if (extra[0].first == "caller") {
      raise("TypeError", fmt::format("macro '{}' was invoked with two values for the special "
                                     "'caller' argument. This is most likely a bug.",
                                     def.name));
    }
    raise("TypeError",
          fmt::format("macro '{}' takes no keyword argument '{}'", def.name, extra[0].first));
  }
  if (!def.uses_varargs && positional.size() > n) {
    raise("TypeError", fmt::format("macro '{}' takes not more than {} argument(s)", def.name, n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) {
      scope->set(def.params[i], std::move(*bound[i]));
    } else if (def.defaults[i]) {
      scope->set(def.params[i], eval(*def.defaults[i], scope));
    } else {
      scope->set(def.params[i],
                 Value::undefined(fmt::format("parameter '{}' was not provided", def.params[i])));
    }
  }
  if (def.uses_caller && !found_caller) scope->set("caller", caller);
  if (def.uses_kwargs) {
    Value kwargs = Value::new_dict();
    for (auto& [k, v] : extra) kwargs.dict().set(Value::string(k), std::move(v));
    scope->set("kwargs", kwargs);
  }
  if (def.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < positional.size(); ++i) rest.push_back(positional[i]);
    scope->set("varargs", Value::new_tuple(std::move(rest)));
  }
  return make_string(capture_body(def.body, scope));
}

// ---- expressions ----

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  check_stack();
  charge(1);
  switch (expr.kind) {
    case ExprKind::kLiteral:
      return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName: {
      const auto& name = static_cast<const NameExpr&>(expr).name;
      if (const Value* v = scope->lookup(name)) return *v;
      return Value::undefined(fmt::format("'{}' is undefined", name));
    }
    case ExprKind::kList: {
      const auto& node = static_cast<const ListExpr&>(expr);
      std::vector<Value> items;
      items.reserve(node.items.size());
      for (const auto& e : node.items) items.push_back(eval(*e, scope));
      return node.tuple ? Value::new_tuple(std::move(items)) : Value::new_list(std::move(items));
    }
    case ExprKind::kDict: {
      const auto& node = static_cast<const DictExpr&>(expr);
      Value d = Value::new_dict();
      for (const auto& [k, v] : node.items) {
        Value key = eval(*k, scope);
        d.dict().set(std::move(key), eval(*v, scope));
      }
      return d;
    }
    case ExprKind::kUnary: {
      const auto& node = static_cast<const UnaryExpr&>(expr);
      return unary_minus(eval(*node.operand, scope), node.negate);
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(expr).operand, scope)));
    case ExprKind::kAnd: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*node.left, scope);
      return truthy(left) ? eval(*node.right, scope) : left;
    }
    case ExprKind::kOr: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*node.left, scope);
      return truthy(left) ? left : eval(*node.right, scope);
    }
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*node.left, scope);
      Value right = eval(*node.right, scope);
      return binary_op(*this, node.op, left, right);
    }
    case ExprKind::kConcat: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      std::string s = to_str(eval(*node.left, scope));
      append_str(s, eval(*node.right, scope));
      return make_string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(static_cast<const CompareExpr&>(expr), scope);
    case ExprKind::kCondExpr: {
      const auto& node = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*node.test, scope))) return eval(*node.then_expr, scope);
      if (node.else_expr) return eval(*node.else_expr, scope);
      return Value::undefined(
          fmt::format("the inline if-expression on line {} evaluated to false "
                      "and no else section was defined.",
                      node.line));
    }
    case ExprKind::kGetAttr: {
      const auto& node = static_cast<const GetAttrExpr&>(expr);
      return get_attr(eval(*node.object, scope), node.name);
    }
    case ExprKind::kGetItem:
      return eval_subscript(static_cast<const GetItemExpr&>(expr), scope);
    case ExprKind::kSlice:
      raise("TemplateSyntaxError", "slice outside of a subscript");
    case ExprKind::kCall:
      return eval_call(static_cast<const CallExpr&>(expr), scope);
    case ExprKind::kFilter: {
      const auto& node = static_cast<const FilterExpr&>(expr);
      Value input = node.operand ? eval(*node.operand, scope) : Value();
      return eval_filter(node, std::move(input), scope);
    }
    case ExprKind::kTest:
      return Value::boolean(eval_test(static_cast<const TestExpr&>(expr), scope));
  }
  return Value();
}

Value Interpreter::eval_compare(const CompareExpr& expr, const ScopePtr& scope) {
  Value left = eval(*expr.first, scope);
  for (const auto& [op, right_expr] : expr.rest) {
    Value right = eval(*right_expr, scope);
    bool ok = false;
    switch (op) {
      case CompareOp::kEq:
        ok = equals(left, right);
        break;
      case CompareOp::kNe:
        ok = !equals(left, right);
        break;
      case CompareOp::kLt:
        ok = compare(left, right, "<");
        break;
      case CompareOp::kLe:
        ok = compare(left, right, "<=");
        break;
      case CompareOp::kGt:
        ok = compare(left, right, ">");
        break;
      case CompareOp::kGe:
        ok = compare(left, right, ">=");
        break;
      case CompareOp::kIn:
        ok = contains(right, left);
        break;
      case CompareOp::kNotIn:
        ok = !contains(right, left);
        break;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_subscript(const GetItemExpr& expr, const ScopePtr& scope) {
  Value obj = eval(*expr.object, scope);
  if (expr.index->kind == ExprKind::kSlice) {
    const auto& s = static_cast<const SliceExpr&>(*expr.index);
    Value start = s.start ? eval(*s.start, scope) : Value::none();
    Value stop = s.stop ? eval(*s.stop, scope) : Value::none();
    Value step = s.step ? eval(*s.step, scope) : Value::none();
    return slice_value(*this, obj, start, stop, step);
  }
  return get_item(obj, eval(*expr.index, scope));
}

CallArgs Interpreter::eval_args(const CallArgsExpr& args, const ScopePtr& scope) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const auto& e : args.positional) out.positional.push_back(eval(*e, scope));
  for (const auto& [k, e] : args.keyword) out.keyword.emplace_back(k, eval(*e, scope));
  if (args.star_args) {
    Value extra = eval(*args.star_args, scope);
    for (Value& v : iterate(extra)) out.positional.push_back(std::move(v));
  }
  if (args.star_kwargs) {
    Value extra = eval(*args.star_kwargs, scope);
    if (!extra.is_dict()) {
      raise("TypeError",
            fmt::format("argument after ** must be a mapping, not {}", type_name(extra)));
    }
    for (const auto& [k, v] : extra.dict().entries) {
      if (!k.is_string()) raise("TypeError", "keywords must be strings");
      out.keyword.emplace_back(k.str(), v);
    }
  }
  return out;
}

Value Interpreter::eval_call(const CallExpr& expr, const ScopePtr& scope) {
  Value callee;
  if (expr.callee->kind == ExprKind::kGetAttr) {
    const auto& attr = static_cast<const GetAttrExpr&>(*expr.callee);
    Value obj = eval(*attr.object, scope);
    if ((obj.is_string() || obj.is_list() || obj.is_dict()) && has_method(obj, attr.name)) {
      if (!options_.allow_mutation && is_mutating_method(obj, attr.name))
        unsafe_access(obj, attr.name);
      CallArgs args = eval_args(expr.args, scope);
      return call_method(*this, obj, attr.name, args);
    }
    callee = get_attr(obj, attr.name);
  } else {
    callee = eval(*expr.callee, scope);
  }
  CallArgs args = eval_args(expr.args, scope);
  return call(callee, args);
}

Value Interpreter::eval_filter(const FilterExpr& expr, Value input, const ScopePtr& scope) {
  if (expr.fn == nullptr) {
    raise("TemplateRuntimeError", fmt::format("No filter named '{}' found.", expr.name));
  }
  CallArgs args = eval_args(expr.args, scope);
  return expr.fn(*this, input, args);
}

bool Interpreter::eval_test(const TestExpr& expr, const ScopePtr& scope) {
  Value input = eval(*expr.operand, scope);
  if (expr.fn == nullptr) {
    raise("TemplateRuntimeError", fmt::format("No test named '{}' found.", expr.name));
  }
  CallArgs args = eval_args(expr.args, scope);
  bool result = expr.fn(*this, input, args);
  return expr.negated ? !result : result;
}

// ---- lookups and calls ----

Value Interpreter::get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      obj.fail_undefined();
    case Kind::kString:
    case Kind::kList:
    case Kind::kDict:
      if (has_method(obj, name)) {
        if (!options_.allow_mutation && is_mutating_method(obj, name)) {
          return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.",
                                              name, type_name(obj)),
                                  true);
        }
        return bound_method(obj, name);
      }
      if (obj.is_dict()) {
        if (const Value* v = obj.dict().find(name)) return *v;
      }
      return missing_attribute(obj, name);
    case Kind::kObject:
      if (auto v = obj.object().get_attr(*this, name)) return std::move(*v);
      return missing_attribute(obj, name);
    default:
      return missing_attribute(obj, name);
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      obj.fail_undefined();
    case Kind::kDict:
      if (is_hashable(key)) {
        if (const Value* v = obj.dict().find(key)) return *v;
      }
      break;
    case Kind::kList:
    case Kind::kString:
      if ((key.is_int() || key.is_bool()) && !obj.is_view()) {
        int64_t i = key.is_int() ? key.as_int() : key.as_bool();
        if (obj.is_list()) {
          auto n = static_cast<int64_t>(obj.list().items.size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.list().items[static_cast<size_t>(i)];
        } else {
          const std::string& s = obj.str();
          if (py::is_ascii(s)) {
            auto n = static_cast<int64_t>(s.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n)
              return Value::string(std::string(1, s[static_cast<size_t>(i)]), obj.is_markup());
          } else {
            std::u32string cps = py::decode(s);
            auto n = static_cast<int64_t>(cps.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
              std::string ch;
              py::append_utf8(ch, cps[static_cast<size_t>(i)]);
              return Value::string(std::move(ch), obj.is_markup());
            }
          }
        }
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return missing_element(obj, key);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_object() && callee.object().is_callable()) {
    return callee.object_ptr()->call(*this, args);
  }
  if (callee.is_undefined()) callee.fail_undefined();
  raise("TypeError", fmt::format("'{}' object is not callable", type_name(callee)));
}

Value Interpreter::call_filter(std::string_view name, const Value& input, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (fn == nullptr) raise("TemplateRuntimeError", fmt::format("No filter named '{}'.", name));
  return fn(*this, input, args);
}

bool Interpreter::call_test(std::string_view name, const Value& input, CallArgs& args) {
  TestFn fn = find_test(name);
  if (fn == nullptr) raise("TemplateRuntimeError", fmt::format("No test named '{}'.", name));
  return fn(*this, input, args);
}

// ---- argument helpers ----

std::vector<std::optional<Value>> bind_args(std::string_view function, CallArgs& args,
                                            std::initializer_list<std::string_view> names) {
  std::vector<std::optional<Value>> out(names.size());
  if (args.positional.size() > names.size()) {
    raise("TypeError", fmt::format("{}() takes at most {} arguments ({} given)", function,
                                   names.size(), args.positional.size()));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (auto& [key, value] : args.keyword) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      raise("TypeError",
            fmt::format("{}() got an unexpected keyword argument '{}'", function, key));
    }
    auto index = static_cast<size_t>(it - names.begin());
    if (out[index]) {
      raise("TypeError", fmt::format("{}() got multiple values for argument '{}'", function, key));
    }
    out[index] = value;
  }
  return out;
}

int64_t int_arg(const Value& v, std::string_view what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_undefined()) v.fail_undefined();
  raise("TypeError",
        fmt::format("'{}' object cannot be interpreted as an integer ({})", type_name(v), what));
}

}  // namespace strata::text::jinja
