// The tree-walking renderer: runs a parsed template against a scope chain, enforcing the render
// limits of Options. One Interpreter renders once; filters, methods and objects call back into it
// for attribute access, calls and limits.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace strata::text::jinja {

// Variables of one frame (template, loop iteration, macro call, ...). Lookups walk to the parent.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Scope(std::shared_ptr<Scope> p = nullptr) : parent(std::move(p)) {}
  const Value* lookup(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const Options& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` in a new scope under `root`.
  std::string render(const Body& body, const ScopePtr& root);

  const Options& options() const { return options_; }

  // Jinja's environment.getattr (`x.name`) and getitem (`x[key]`), sandboxed.
  Value get_attr(const Value& obj, std::string_view name);
  Value get_item(const Value& obj, const Value& key);
  Value call(const Value& callee, CallArgs& args);
  Value call_filter(std::string_view name, const Value& input, CallArgs& args);
  bool call_test(std::string_view name, const Value& input, CallArgs& args);

  // Invokes a macro (or a call block's caller) defined in `closure`.
  Value invoke_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args);
  // Runs a `recursive` for loop's body over `iterable` at `depth` (for `loop(...)`).
  Value render_recursive_loop(const ForStmt& node, const ScopePtr& scope, const Value& iterable,
                              int depth);

  // Limits. charge() counts work units; check_size() bounds a string or sequence being built.
  void charge(size_t units);
  void check_size(size_t size) const;
  Value make_string(std::string s, bool markup = false);
  // Remembers a container or object that may take part in a reference cycle; all of them are
  // emptied when the render ends, so cycles cannot leak.
  void track(const Value& v);

  int current_line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  class OutputCapture;
  class DepthGuard;

  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Stmt& stmt, const ScopePtr& scope);
  void exec_for(const ForStmt& node, const ScopePtr& scope, const Value& iterable, int depth);
  void assign(const Target& target, const Value& value, const ScopePtr& scope);
  void write(std::string_view text);
  std::string capture_body(const Body& body, const ScopePtr& scope);
  Value apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value value,
                      const ScopePtr& scope);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_call(const CallExpr& expr, const ScopePtr& scope);
  Value eval_filter(const FilterExpr& expr, Value input, const ScopePtr& scope);
  bool eval_test(const TestExpr& expr, const ScopePtr& scope);
  Value eval_compare(const CompareExpr& expr, const ScopePtr& scope);
  Value eval_subscript(const GetItemExpr& expr, const ScopePtr& scope);
  CallArgs eval_args(const CallArgsExpr& args, const ScopePtr& scope);
  void check_stack();

  const Options& options_;
  std::string* out_ = nullptr;
  size_t operations_ = 0;
  size_t loop_iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
  const char* stack_base_ = nullptr;
  std::vector<Value> tracked_;
  std::vector<ScopePtr> closure_scopes_;
};

// Python operators (operators.cpp).
Value binary_op(Interpreter& interp, BinaryOp op, const Value& a, const Value& b);
Value unary_minus(const Value& v, bool negate);
bool contains(const Value& container, const Value& item);
Value slice_value(Interpreter& interp, const Value& obj, const Value& start, const Value& stop,
                  const Value& step);
// `escape`: the format is Markup, which escapes the arguments it interpolates.
std::string percent_format(Interpreter& interp, const std::string& format, const Value& args,
                           bool escape = false);

// Methods of str, list and dict (methods.cpp).
bool has_method(const Value& self, std::string_view name);
// True when `name` is a method that mutates (blocked by the immutable sandbox).
bool is_mutating_method(const Value& self, std::string_view name);
Value call_method(Interpreter& interp, const Value& self, std::string_view name, CallArgs& args);
Value bound_method(const Value& self, std::string_view name);
std::string str_format(Interpreter& interp, const std::string& format, CallArgs& args,
                       bool escape = false);

// Global functions: range, dict, namespace, cycler, joiner, raise_exception, strftime_now
// (builtins.cpp).
void add_globals(Scope& scope);

// Argument binding for built-in callables: args[i] is the positional or keyword value for
// names[i], or nullopt. Raises TypeError for unknown keywords or too many positionals.
std::vector<std::optional<Value>> bind_args(std::string_view function, CallArgs& args,
                                            std::initializer_list<std::string_view> names);
// Integer value of an argument (int or bool), raising TypeError otherwise.
int64_t int_arg(const Value& v, std::string_view what);

}  // namespace strata::text::jinja
