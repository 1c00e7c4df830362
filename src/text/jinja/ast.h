// The syntax tree of a parsed template: expressions and statements, as the parser builds them
// and the interpreter walks them. Nodes own their children; a node's `kind` tells which struct it
// is.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace strata::text::jinja {

class Interpreter;
using FilterFn = Value (*)(Interpreter& interp, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& input, CallArgs& args);

// ---- Expressions ----

enum class ExprKind {
  kLiteral,
  kName,
  kList,  // list or tuple display
  kDict,
  kUnary,
  kBinary,
  kAnd,
  kOr,
  kNot,
  kCompare,
  kConcat,
  kCondExpr,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
};

struct Expr {
  ExprKind kind;
  int line;
  int depth = 1;  // height of the subtree, bounded by the parser so walking it cannot overflow
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  Value value;
  LiteralExpr(int l, Value v) : Expr(ExprKind::kLiteral, l), value(std::move(v)) {}
};

struct NameExpr : Expr {
  std::string name;
  NameExpr(int l, std::string n) : Expr(ExprKind::kName, l), name(std::move(n)) {}
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple;
  ListExpr(int l, bool is_tuple) : Expr(ExprKind::kList, l), tuple(is_tuple) {}
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };

struct UnaryExpr : Expr {  // kUnary (negate / plus) or kNot
  bool negate;             // for kUnary: true for `-x`, false for `+x`
  ExprPtr operand;
  UnaryExpr(ExprKind k, int l, bool neg, ExprPtr e)
      : Expr(k, l), negate(neg), operand(std::move(e)) {}
};

struct BinaryExpr : Expr {  // kBinary with op, or kAnd / kOr / kConcat (op unused)
  BinaryOp op;
  ExprPtr left, right;
  BinaryExpr(ExprKind k, int l, BinaryOp o, ExprPtr a, ExprPtr b)
      : Expr(k, l), op(o), left(std::move(a)), right(std::move(b)) {}
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  CompareExpr(int l, ExprPtr e) : Expr(ExprKind::kCompare, l), first(std::move(e)) {}
};

struct CondExpr : Expr {
  ExprPtr test, then_expr, else_expr;  // else_expr may be null (yields undefined)
  explicit CondExpr(int l) : Expr(ExprKind::kCondExpr, l) {}
};

struct GetAttrExpr : Expr {
  ExprPtr object;
  std::string name;
  GetAttrExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kGetAttr, l), object(std::move(o)), name(std::move(n)) {}
};

struct GetItemExpr : Expr {
  ExprPtr object, index;  // index may be a SliceExpr
  GetItemExpr(int l, ExprPtr o, ExprPtr i)
      : Expr(ExprKind::kGetItem, l), object(std::move(o)), index(std::move(i)) {}
};

struct SliceExpr : Expr {
  ExprPtr start, stop, step;  // each may be null
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
};

struct CallArgsExpr {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args, star_kwargs;  // *args, **kwargs (may be null)
};

struct CallExpr : Expr {
  ExprPtr callee;
  CallArgsExpr args;
  CallExpr(int l, ExprPtr c) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
};

struct FilterExpr : Expr {
  ExprPtr operand;  // null inside `{% filter %}` and `{% set x | f %}` (applied to the body)
  std::string name;
  FilterFn fn = nullptr;  // null when the filter is unknown (error at runtime, Jinja's soft frame)
  CallArgsExpr args;
  FilterExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kFilter, l), operand(std::move(o)), name(std::move(n)) {}
};

struct TestExpr : Expr {
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;
  bool negated = false;
  CallArgsExpr args;
  TestExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kTest, l), operand(std::move(o)), name(std::move(n)) {}
};

// ---- Statements ----

enum class StmtKind {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kScope,  // a body in its own scope: {% generation %} (HF's assistant tracker)
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind;
  int line;
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// The left side of an assignment or a loop variable: a name, a tuple of targets, or `ns.attr`.
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr } kind = Kind::kName;
  std::string name;  // variable, or namespace variable for kNamespaceAttr
  std::string attr;
  std::vector<Target> items;
};

struct TextStmt : Stmt {
  std::string text;
  TextStmt(int l, std::string t) : Stmt(StmtKind::kText, l), text(std::move(t)) {}
};

struct OutputStmt : Stmt {
  ExprPtr expr;
  OutputStmt(int l, ExprPtr e) : Stmt(StmtKind::kOutput, l), expr(std::move(e)) {}
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and elifs
  Body else_body;
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
};

struct ForStmt : Stmt {
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond` (may be null)
  Body body, else_body;
  bool recursive = false;
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
};

struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  explicit SetStmt(int l) : Stmt(StmtKind::kSet, l) {}
};

struct SetBlockStmt : Stmt {
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  explicit SetBlockStmt(int l) : Stmt(StmtKind::kSetBlock, l) {}
};

// Parameters and body of a macro or of a call block's caller.
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null where the param has no default
  Body body;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct MacroStmt : Stmt {
  MacroDef def;
  explicit MacroStmt(int l) : Stmt(StmtKind::kMacro, l) {}
};

struct CallBlockStmt : Stmt {
  std::unique_ptr<CallExpr> call;
  MacroDef caller;  // unnamed (Jinja prints it as <Macro anonymous>)
  explicit CallBlockStmt(int l) : Stmt(StmtKind::kCallBlock, l) {}
};

struct FilterBlockStmt : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::kFilterBlock, l) {}
};

struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
  explicit WithStmt(int l) : Stmt(StmtKind::kWith, l) {}
};

struct ScopeStmt : Stmt {
  Body body;
  explicit ScopeStmt(int l) : Stmt(StmtKind::kScope, l) {}
};

struct LoopControlStmt : Stmt {  // kBreak or kContinue
  LoopControlStmt(StmtKind k, int l) : Stmt(k, l) {}
};

}  // namespace strata::text::jinja
