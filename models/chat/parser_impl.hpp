// The parser's internals, shared by parser.cpp (statements) and parser_expressions.cpp (expressions).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat/ast.hpp"
#include "models/chat/lexer.hpp"

namespace qrt::chat::parsing {

using namespace ast;

// Parser recursion (nested parentheses, `not not ...`, nested blocks) and expression tree height are bounded so
// that neither parsing nor evaluation can exhaust the stack on hostile input.
inline constexpr int kMaxNesting = 100;
inline constexpr int kMaxExprDepth = 200;

using Names = std::initializer_list<std::string_view>;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : tokens_(std::move(tokens)), name_(name) {}

  Result<StmtList> parse_all() { return subparse({}); }

 private:
  struct NestingGuard {
    explicit NestingGuard(int& n) : n_(n) { ++n_; }
    ~NestingGuard() { --n_; }
    int& n_;
  };

  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().kind == TokenKind::kOperator && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == TokenKind::kName && cur().text == n; }
  bool is_name_in(Names names) const {
    return cur().kind == TokenKind::kName && std::find(names.begin(), names.end(), cur().text) != names.end();
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kVariableEnd: return "end of print statement";
      case TokenKind::kBlockEnd: return "end of statement block";
      case TokenKind::kVariableBegin: return "begin of print statement";
      case TokenKind::kBlockBegin: return "begin of statement block";
      case TokenKind::kEof: return "end of template";
      case TokenKind::kData: return "template data";
      case TokenKind::kString: return "string";
      default: return t.text;
    }
  }

  Status fail(const std::string& message, const Token& at) const {
    return format_error(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                        ": template syntax error: " + message);
  }
  Status fail(const std::string& message) const { return fail(message, cur()); }

  Status expect_op(std::string_view op) {
    if (!skip_op(op)) return fail("expected token '" + std::string(op) + "', got '" + describe(cur()) + "'");
    return ok_status();
  }
  Status expect_kind(TokenKind kind, const char* what) {
    if (cur().kind != kind) return fail(std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    next();
    return ok_status();
  }
  Result<std::string> expect_name() {
    if (cur().kind != TokenKind::kName) return fail("expected token 'name', got '" + describe(cur()) + "'");
    std::string n = cur().text;
    next();
    return n;
  }

  ExprPtr make(ExprKind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->foldable = kind == ExprKind::kConst;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  static Token position_of(const Expr& e) {
    Token t;
    t.line = e.line;
    t.column = e.column;
    return t;
  }

  static bool is_foldable(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kName:
      case ExprKind::kCall: return false;
      case ExprKind::kFilter:
        // Filters that take Jinja's context are never folded.
        if (!e.node || e.name == "map" || e.name == "select" || e.name == "reject" || e.name == "selectattr" ||
            e.name == "rejectattr") {
          return false;
        }
        break;
      default: break;
    }
    auto constant = [](const ExprPtr& c) { return !c || c->foldable; };
    // Branches that may not be taken are checked when folding (a name there makes folding fail).
    if (e.kind == ExprKind::kCondExpr) return constant(e.right);
    if (e.kind == ExprKind::kAnd || e.kind == ExprKind::kOr) return constant(e.node);
    if (!constant(e.node) || !constant(e.right) || !constant(e.other) || e.dyn_args || e.dyn_kwargs) return false;
    for (const auto& c : e.items) {
      if (!constant(c)) return false;
    }
    for (const auto& c : e.args) {
      if (!constant(c)) return false;
    }
    for (const auto& k : e.kwargs) {
      if (!constant(k.value)) return false;
    }
    return true;
  }

  // Records the subtree height of a freshly built node and refuses trees too tall to evaluate safely.
  Status seal(Expr& e) const {
    int d = 0;
    auto see = [&](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    see(e.node);
    see(e.right);
    see(e.other);
    see(e.dyn_args);
    see(e.dyn_kwargs);
    for (const auto& c : e.items) see(c);
    for (const auto& c : e.args) see(c);
    for (const auto& k : e.kwargs) see(k.value);
    e.depth = d + 1;
    e.foldable = is_foldable(e);
    if (e.depth > kMaxExprDepth) {
      return format_error(name_ + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) +
                          ": template syntax error: expression nested deeper than " +
                          std::to_string(kMaxExprDepth));
    }
    return ok_status();
  }

  // statements (parser.cpp)
  Result<StmtList> subparse(Names end_tokens);
  static std::string quoted(Names names);
  // The body of a block statement: `%}` ... up to one of end_tokens (consumed when drop_needle).
  Result<StmtList> parse_body(Names end_tokens, bool drop_needle);
  StmtPtr make_stmt(StmtKind kind, const Token& at) const;
  Result<StmtPtr> parse_statement(Names end_tokens);
  Result<StmtPtr> parse_for();
  Result<StmtPtr> parse_if();
  Result<StmtPtr> parse_set();
  Result<StmtPtr> parse_macro();
  Result<StmtPtr> parse_filter_block();
  Result<StmtPtr> parse_with();
  Result<StmtPtr> parse_print();
  // A name, `ns.attr` (with_namespace) or a tuple of names, ended by a tag end or one of extra_end.
  Result<Target> parse_assign_target(Names extra_end, bool with_namespace);

  // expressions (parser_expressions.cpp)
  bool is_tuple_end(Names extra_end) const;
  Result<ExprPtr> parse_tuple(bool with_condexpr, Names extra_end, bool explicit_parentheses);
  Result<ExprPtr> parse_expression(bool with_condexpr);
  Result<ExprPtr> parse_condexpr();
  template <class Operand>
  Result<ExprPtr> parse_logical(std::string_view keyword, ExprKind kind, Operand operand);
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  template <class Operand>
  Result<ExprPtr> parse_binary(std::initializer_list<std::pair<const char*, BinaryOp>> ops, Operand operand);
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_postfix(ExprPtr node);
  Result<ExprPtr> parse_filter_expr(ExprPtr node);
  Result<ExprPtr> parse_subscript(ExprPtr node);
  Result<ExprPtr> parse_subscribed();
  Status parse_call_args(Expr& e);
  Result<ExprPtr> parse_call(ExprPtr node);
  Result<std::string> parse_dotted_name();
  // `| name(args)` repeated; node may be null (filter blocks). Returns node unchanged when no filter follows.
  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline);
  Result<ExprPtr> parse_test(ExprPtr node);
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const std::string& name_;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroDef*> macros_;
};

}  // namespace qrt::chat::parsing
