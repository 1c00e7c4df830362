// Jinja parser (see parser.h): a recursive-descent parser with Jinja2's precedence, from lowest
// to highest: `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary
// - +, then primaries with `.attr`, `[index]`, calls, `| filter` and `is test`.
#include "text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "text/jinja/filters.h"

namespace strata::text::jinja {
namespace {

using EndTags = std::initializer_list<std::string_view>;

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof:
      return "end of template";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kText:
      return "template data";
    default:
      return t.value;
  }
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().type != TokenType::kEof) error(fmt::format("unexpected '{}'", describe(cur())));
    for (const auto& [node, soft] : unknown_) {
      if (!soft) {
        syntax_error_at(
            node.line,
            fmt::format("No {} named '{}'.", node.is_filter ? "filter" : "test", node.name),
            "TemplateAssertionError");
      }
    }
    return body;
  }

 private:
  struct UnknownName {
    std::string name;
    bool is_filter;
    int line;
  };

  // ---- token stream ----

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().value == op;
  }
  bool is_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(fmt::format("expected token '{}', got '{}'", op, describe(cur())));
  }
  void expect(TokenType type, std::string_view what) {
    if (cur().type != type)
      error(fmt::format("expected token '{}', got '{}'", what, describe(cur())));
    advance();
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) {
      error(fmt::format("expected token 'name', got '{}'", describe(cur())));
    }
    std::string v = cur().value;
    advance();
    return v;
  }

  [[noreturn]] void error(const std::string& message) const {
    syntax_error(message, cur().line, cur().column);
  }
  [[noreturn]] static void syntax_error_at(int line, const std::string& message, const char* kind) {
    fail(ErrorKind::kInvalidInput, "{}: {} (line {})", kind, message, line);
  }

  // ---- depth bounds ----

  struct NestingGuard {
    Parser& p;
    explicit NestingGuard(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxBlockNesting + kMaxExpressionDepth)
        p.error("template nesting too deep");
    }
    ~NestingGuard() { --p.nesting_; }
  };

  template <typename T>
  std::unique_ptr<T> sized(std::unique_ptr<T> e, std::initializer_list<const Expr*> children) {
    int d = 0;
    for (const Expr* c : children)
      if (c != nullptr) d = std::max(d, c->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return e;
  }

  int args_depth(const CallArgsExpr& a) const {
    int d = 0;
    for (const auto& e : a.positional) d = std::max(d, e->depth);
    for (const auto& [k, e] : a.keyword) d = std::max(d, e->depth);
    if (a.star_args) d = std::max(d, a.star_args->depth);
    if (a.star_kwargs) d = std::max(d, a.star_kwargs->depth);
    return d;
  }

  // ---- statements ----

  bool at_end_tag(EndTags end_tags) const {
    if (cur().type != TokenType::kBlockBegin) return false;
    const Token& name = peek();
    if (name.type != TokenType::kName) return false;
    return std::find(end_tags.begin(), end_tags.end(), name.value) != end_tags.end();
  }

  // Parses statements up to one of end_tags; on return the current token is that tag's name.
  Body parse_body(EndTags end_tags) {
    if (++block_depth_ > kMaxBlockNesting) error("blocks nested too deeply");
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) {
        if (end_tags.size() == 0) break;
        std::string wanted;
        for (auto tag : end_tags) {
          wanted += wanted.empty() ? "'" : " or '";
          wanted += tag;
          wanted += '\'';
        }
        error("Unexpected end of template. Jinja was looking for the following tags: " + wanted +
              ".");
      }
      if (t.type == TokenType::kText) {
        body.push_back(std::make_unique<TextStmt>(t.line, t.value));
        advance();
      } else if (t.type == TokenType::kVarBegin) {
        int line = t.line;
        advance();
        ExprPtr e = parse_tuple(false, true, {}, false);
        expect(TokenType::kVarEnd, "end of print statement");
        body.push_back(std::make_unique<OutputStmt>(line, std::move(e)));
      } else if (t.type == TokenType::kBlockBegin) {
        if (at_end_tag(end_tags)) {
          advance();
          break;
        }
        advance();
        body.push_back(parse_statement());
        expect(TokenType::kBlockEnd, "end of statement block");
      } else {
        error(fmt::format("unexpected '{}'", describe(t)));
      }
    }
    --block_depth_;
    return body;
  }

  // Parses the body after a tag's `%}`, up to an end tag, consuming the end tag's name when
  // drop_needle is set.
  Body parse_statements(EndTags end_tags, bool drop_needle) {
    expect(TokenType::kBlockEnd, "end of statement block");
    Body body = parse_body(end_tags);
    if (drop_needle) advance();
    return body;
  }

  StmtPtr parse_statement() {
    if (cur().type != TokenType::kName) error("tag name expected");
    const std::string tag = cur().value;
    int line = cur().line;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "print") {
      advance();
      return std::make_unique<OutputStmt>(line, parse_tuple(false, true, {}, false));
    }
    if (tag == "generation") {
      advance();
      auto node = std::make_unique<ScopeStmt>(line);
      FrameGuard frame(*this, false, false);
      node->body = parse_statements({"endgeneration"}, true);
      return node;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(fmt::format("'{}' outside of a loop", tag));
      advance();
      return std::make_unique<LoopControlStmt>(
          tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    error(fmt::format("Encountered unknown tag '{}'.", tag));
  }

  // Jinja compiles `if` bodies in a "soft" frame (unknown filters fail only when run) and loop,
  // macro and block bodies in new frames (neither soft nor, for macros, inside the loop).
  struct FrameGuard {
    Parser& p;
    bool soft, in_loop;
    int loop_depth;
    FrameGuard(Parser& parser, bool make_soft, bool keep_loop)
        : p(parser), soft(parser.soft_), loop_depth(parser.loop_depth_) {
      p.soft_ = make_soft;
      if (!keep_loop) p.loop_depth_ = 0;
    }
    ~FrameGuard() {
      p.soft_ = soft;
      p.loop_depth_ = loop_depth;
    }
  };

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(cur().line);
    advance();
    FrameGuard frame(*this, true, true);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      std::string tag = cur().value;
      advance();
      if (tag == "elif") continue;
      if (tag == "else") node->else_body = parse_statements({"endif"}, true);
      break;
    }
    return node;
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(cur().line);
    advance();
    node->target = parse_assign_target(true, false, {"in"});
    if (!skip_name("in")) error(fmt::format("expected token 'in', got '{}'", describe(cur())));
    node->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    node->recursive = skip_name("recursive");
    FrameGuard frame(*this, false, true);
    ++loop_depth_;
    node->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    std::string tag = cur().value;
    advance();
    if (tag == "else") node->else_body = parse_statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_set() {
    int line = cur().line;
    advance();
    Target target = parse_assign_target(true, true, {});
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(line);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(line);
    node->target = std::move(target);
    if (is_op("|")) {
      advance();
      node->filters = parse_filter_chain();
    }
    FrameGuard frame(*this, false, false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  void parse_signature(MacroDef& def) {
    expect_op("(");
    while (!is_op(")")) {
      if (!def.params.empty()) expect_op(",");
      def.params.push_back(expect_name());
      if (skip_op("=")) {
        def.defaults.push_back(parse_expression(true));
      } else {
        if (std::any_of(def.defaults.begin(), def.defaults.end(),
                        [](const ExprPtr& d) { return d != nullptr; }))
          error("non-default argument follows default argument");
        def.defaults.push_back(nullptr);
      }
    }
    expect_op(")");
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(cur().line);
    advance();
    node->def.name = expect_name();
    macro_stack_.push_back(&node->def);
    parse_signature(node->def);
    FrameGuard frame(*this, false, false);
    node->def.body = parse_statements({"endmacro"}, true);
    macro_stack_.pop_back();
    return node;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(cur().line);
    advance();
    macro_stack_.push_back(&node->caller);
    if (is_op("(")) parse_signature(node->caller);
    macro_stack_.pop_back();
    ExprPtr call = parse_expression(true);
    if (call->kind != ExprKind::kCall) error("expected call");
    node->call.reset(static_cast<CallExpr*>(call.release()));
    macro_stack_.push_back(&node->caller);
    FrameGuard frame(*this, false, false);
    node->caller.body = parse_statements({"endcall"}, true);
    macro_stack_.pop_back();
    return node;
  }

  StmtPtr parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(cur().line);
    advance();
    node->filters = parse_filter_chain();
    FrameGuard frame(*this, false, false);
    node->body = parse_statements({"endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<WithStmt>(cur().line);
    advance();
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      Target target = parse_assign_target(false, false, {});
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    FrameGuard frame(*this, false, true);
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  // A name, `ns.attr` (with_namespace), or a tuple of names and parenthesized tuples.
  Target parse_assign_target(bool with_tuple, bool with_namespace, EndTags extra_end) {
    if (with_namespace && cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().value == ".") {
      Target t;
      t.kind = Target::Kind::kNamespaceAttr;
      t.name = expect_name();
      advance();
      t.attr = expect_name();
      return t;
    }
    Target first = parse_target_primary();
    if (!with_tuple || !is_op(",")) return first;
    Target tuple;
    tuple.kind = Target::Kind::kTuple;
    tuple.items.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_tuple_end(extra_end) || is_op("=") || is_op("|")) break;
      tuple.items.push_back(parse_target_primary());
    }
    return tuple;
  }

  Target parse_target_primary() {
    NestingGuard guard(*this);
    if (cur().type == TokenType::kName) {
      static const char* const kConstants[] = {"true", "false", "none", "True", "False", "None"};
      for (const char* c : kConstants)
        if (cur().value == c) error(fmt::format("can't assign to 'const'"));
      Target t;
      t.name = expect_name();
      return t;
    }
    if (skip_op("(")) {
      Target tuple;
      tuple.kind = Target::Kind::kTuple;
      while (!is_op(")")) {
        if (!tuple.items.empty()) expect_op(",");
        if (is_op(")")) break;
        tuple.items.push_back(parse_target_primary());
      }
      expect_op(")");
      if (tuple.items.size() == 1 && toks_[pos_ - 2].value != ",") return std::move(tuple.items[0]);
      return tuple;
    }
    error(fmt::format("can't assign to '{}'", describe(cur())));
  }

  // ---- expressions ----

  bool is_tuple_end(EndTags extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd ||
        t.type == TokenType::kEof || (t.type == TokenType::kOperator && t.value == ")")) {
      return true;
    }
    if (t.type != TokenType::kName) return false;
    return std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
  }

  // Jinja's parse_tuple: comma-separated expressions; a tuple when there is a comma.
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, EndTags extra_end,
                      bool explicit_parentheses) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses)
        error(fmt::format("Expected an expression, got '{}'", describe(cur())));
    }
    auto node = std::make_unique<ListExpr>(line, true);
    int d = 0;
    for (auto& e : items) d = std::max(d, e->depth);
    node->items = std::move(items);
    node->depth = d + 1;
    if (node->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return node;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    NestingGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    size_t unknown_mark = unknown_.size();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = cur().line;
      advance();
      auto node = std::make_unique<CondExpr>(line);
      node->then_expr = std::move(expr);
      node->test = parse_or();
      if (skip_name("else")) {
        NestingGuard guard(*this);
        node->else_expr = parse_condexpr();
      }
      // The whole conditional expression is a soft frame in Jinja.
      for (size_t i = unknown_mark; i < unknown_.size(); ++i) unknown_[i].second = true;
      const Expr* a = node->then_expr.get();
      const Expr* b = node->test.get();
      const Expr* c = node->else_expr.get();
      expr = sized(std::move(node), {a, b, c});
    }
    return expr;
  }

  ExprPtr logical(ExprKind kind, ExprPtr left, ExprPtr right, int line) {
    auto node =
        std::make_unique<BinaryExpr>(kind, line, BinaryOp::kAdd, std::move(left), std::move(right));
    const Expr* l = node->left.get();
    const Expr* r = node->right.get();
    return sized(std::move(node), {l, r});
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      advance();
      left = logical(ExprKind::kOr, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      advance();
      left = logical(ExprKind::kAnd, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      NestingGuard guard(*this);
      int line = cur().line;
      advance();
      ExprPtr operand = parse_not();
      const Expr* o = operand.get();
      return sized(std::make_unique<UnaryExpr>(ExprKind::kNot, line, false, std::move(operand)),
                   {o});
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
    while (true) {
      CompareOp op;
      if (skip_op("==")) {
        op = CompareOp::kEq;
      } else if (skip_op("!=")) {
        op = CompareOp::kNe;
      } else if (skip_op("<")) {
        op = CompareOp::kLt;
      } else if (skip_op("<=")) {
        op = CompareOp::kLe;
      } else if (skip_op(">")) {
        op = CompareOp::kGt;
      } else if (skip_op(">=")) {
        op = CompareOp::kGe;
      } else if (skip_name("in")) {
        op = CompareOp::kIn;
      } else if (is_name("not") && peek().type == TokenType::kName && peek().value == "in") {
        advance();
        advance();
        op = CompareOp::kNotIn;
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    auto node = std::make_unique<CompareExpr>(line, std::move(first));
    int d = node->first->depth;
    for (auto& [op, e] : rest) d = std::max(d, e->depth);
    node->rest = std::move(rest);
    node->depth = d + 1;
    if (node->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return node;
  }

  ExprPtr binary(BinaryOp op, ExprPtr left, ExprPtr right, int line,
                 ExprKind kind = ExprKind::kBinary) {
    auto node = std::make_unique<BinaryExpr>(kind, line, op, std::move(left), std::move(right));
    const Expr* l = node->left.get();
    const Expr* r = node->right.get();
    return sized(std::move(node), {l, r});
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      BinaryOp op = cur().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
      int line = cur().line;
      advance();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      advance();
      left = binary(BinaryOp::kAdd, std::move(left), parse_math2(), line, ExprKind::kConcat);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (true) {
      BinaryOp op;
      if (is_op("*")) {
        op = BinaryOp::kMul;
      } else if (is_op("/")) {
        op = BinaryOp::kDiv;
      } else if (is_op("//")) {
        op = BinaryOp::kFloorDiv;
      } else if (is_op("%")) {
        op = BinaryOp::kMod;
      } else {
        break;
      }
      int line = cur().line;
      advance();
      left = binary(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      advance();
      left = binary(BinaryOp::kPow, std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      bool negate = cur().value == "-";
      int line = cur().line;
      advance();
      ExprPtr operand = parse_unary(false);
      const Expr* o = operand.get();
      node = sized(std::make_unique<UnaryExpr>(ExprKind::kUnary, line, negate, std::move(operand)),
                   {o});
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    NestingGuard guard(*this);
    const Token& t = cur();
    int line = t.line;
    switch (t.type) {
      case TokenType::kName: {
        std::string name = t.value;
        advance();
        if (name == "true" || name == "True")
          return std::make_unique<LiteralExpr>(line, Value::boolean(true));
        if (name == "false" || name == "False")
          return std::make_unique<LiteralExpr>(line, Value::boolean(false));
        if (name == "none" || name == "None")
          return std::make_unique<LiteralExpr>(line, Value::none());
        note_name_use(name);
        return std::make_unique<NameExpr>(line, std::move(name));
      }
      case TokenType::kString: {
        std::string s;
        while (cur().type == TokenType::kString) {
          s += cur().value;
          advance();
        }
        return std::make_unique<LiteralExpr>(line, Value::string(std::move(s)));
      }
      case TokenType::kInteger: {
        int64_t v = t.int_value;
        advance();
        return std::make_unique<LiteralExpr>(line, Value::integer(v));
      }
      case TokenType::kFloat: {
        double v = t.float_value;
        advance();
        return std::make_unique<LiteralExpr>(line, Value::number(v));
      }
      case TokenType::kOperator:
        if (t.value == "(") {
          advance();
          ExprPtr e = parse_tuple(false, true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    error(fmt::format("unexpected '{}'", describe(t)));
  }

  void note_name_use(const std::string& name) {
    if (macro_stack_.empty()) return;
    MacroDef* def = macro_stack_.back();
    if (name == "caller") def->uses_caller = true;
    if (name == "varargs") def->uses_varargs = true;
    if (name == "kwargs") def->uses_kwargs = true;
  }

  ExprPtr parse_list() {
    auto node = std::make_unique<ListExpr>(cur().line, false);
    expect_op("[");
    int d = 0;
    while (!is_op("]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("]")) break;
      node->items.push_back(parse_expression(true));
      d = std::max(d, node->items.back()->depth);
    }
    expect_op("]");
    node->depth = d + 1;
    if (node->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return node;
  }

  ExprPtr parse_dict() {
    auto node = std::make_unique<DictExpr>(cur().line);
    expect_op("{");
    int d = 0;
    while (!is_op("}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      ExprPtr value = parse_expression(true);
      d = std::max({d, key->depth, value->depth});
      node->items.emplace_back(std::move(key), std::move(value));
    }
    expect_op("}");
    node->depth = d + 1;
    if (node->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return node;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        advance();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    int line = cur().line;
    if (skip_op(".")) {
      const Token& attr = cur();
      if (attr.type == TokenType::kName) {
        std::string name = attr.value;
        advance();
        auto e = std::make_unique<GetAttrExpr>(line, std::move(node), std::move(name));
        const Expr* o = e->object.get();
        return sized(std::move(e), {o});
      }
      if (attr.type != TokenType::kInteger) error("expected name or number");
      auto index = std::make_unique<LiteralExpr>(line, Value::integer(attr.int_value));
      advance();
      auto e = std::make_unique<GetItemExpr>(line, std::move(node), std::move(index));
      const Expr* o = e->object.get();
      return sized(std::move(e), {o});
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr index;
    if (args.size() == 1) {
      index = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<ListExpr>(line, true);
      int d = 0;
      for (auto& a : args) d = std::max(d, a->depth);
      tuple->items = std::move(args);
      tuple->depth = d + 1;
      index = std::move(tuple);
    }
    auto e = std::make_unique<GetItemExpr>(line, std::move(node), std::move(index));
    const Expr* o = e->object.get();
    const Expr* i = e->index.get();
    return sized(std::move(e), {o, i});
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!skip_op(":")) {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      advance();
      start = std::move(e);
    }
    auto slice = std::make_unique<SliceExpr>(line);
    slice->start = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) slice->step = parse_expression(true);
    }
    const Expr* a = slice->start.get();
    const Expr* b = slice->stop.get();
    const Expr* c = slice->step.get();
    return sized(std::move(slice), {a, b, c});
  }

  CallArgsExpr parse_call_args() {
    CallArgsExpr args;
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) error("invalid syntax for function call expression");
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star_args && !args.star_kwargs);
        args.star_args = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.star_kwargs);
        args.star_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
                 peek().value == "=") {
        ensure(!args.star_args && !args.star_kwargs);
        std::string key = cur().value;
        advance();
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto call = std::make_unique<CallExpr>(cur().line, std::move(node));
    call->args = parse_call_args();
    call->depth = std::max(call->callee->depth, args_depth(call->args)) + 1;
    if (call->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return call;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) {
      name += '.';
      name += expect_name();
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node) {
    int line = cur().line;
    auto filter = std::make_unique<FilterExpr>(line, std::move(node), parse_dotted_name());
    filter->fn = find_filter(filter->name);
    if (filter->fn == nullptr) unknown_.emplace_back(UnknownName{filter->name, true, line}, soft_);
    if (is_op("(")) filter->args = parse_call_args();
    int d = filter->operand ? filter->operand->depth : 0;
    filter->depth = std::max(d, args_depth(filter->args)) + 1;
    if (filter->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return filter;
  }

  // `| f(args) | g` after `{% filter` or `{% set x`: filters applied to a rendered body.
  std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain() {
    std::vector<std::unique_ptr<FilterExpr>> chain;
    do {
      ExprPtr f = parse_filter(nullptr);
      chain.emplace_back(static_cast<FilterExpr*>(f.release()));
    } while (skip_op("|"));
    return chain;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = cur().line;
    advance();  // `is`
    bool negated = skip_name("not");
    auto test = std::make_unique<TestExpr>(line, std::move(node), parse_dotted_name());
    test->negated = negated;
    test->fn = find_test(test->name);
    if (test->fn == nullptr) unknown_.emplace_back(UnknownName{test->name, false, line}, soft_);
    const Token& t = cur();
    bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString ||
                     t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
                     (t.type == TokenType::kOperator && (t.value == "[" || t.value == "{"));
    if (is_op("(")) {
      test->args = parse_call_args();
    } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      test->args.positional.push_back(std::move(arg));
    }
    int d = test->operand->depth;
    test->depth = std::max(d, args_depth(test->args)) + 1;
    if (test->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return test;
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
  bool soft_ = false;
  std::vector<MacroDef*> macro_stack_;
  std::vector<std::pair<UnknownName, bool>> unknown_;  // unknown filters/tests, and if soft
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace strata::text::jinja
