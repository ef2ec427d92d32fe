#include "models/chat/parser.hpp"

#include "models/chat/builtins.hpp"
#include "models/chat/parser_impl.hpp"

namespace qrt::chat {

namespace parsing {

Result<StmtList> Parser::subparse(Names end_tokens) {
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting) return fail("blocks nested too deeply");
  StmtList body;
  while (true) {
    const Token& t = cur();
    if (t.kind == TokenKind::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kData;
      s->line = t.line;
      s->column = t.column;
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.kind == TokenKind::kVariableBegin) {
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = t.line;
      s->column = t.column;
      QRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, {}, false));
      QRT_TRY(expect_kind(TokenKind::kVariableEnd, "end of print statement"));
      body.push_back(std::move(s));
    } else if (t.kind == TokenKind::kBlockBegin) {
      next();
      if (end_tokens.size() != 0 && is_name_in(end_tokens)) return body;
      QRT_ASSIGN_OR_RETURN(StmtPtr s, parse_statement(end_tokens));
      if (s) body.push_back(std::move(s));
      QRT_TRY(expect_kind(TokenKind::kBlockEnd, "end of statement block"));
    } else if (t.kind == TokenKind::kEof) {
      if (end_tokens.size() != 0) return fail("unexpected end of template, expected " + quoted(end_tokens));
      return body;
    } else {
      return fail("unexpected '" + describe(t) + "'");
    }
  }
}

std::string Parser::quoted(Names names) {
  std::string out;
  size_t i = 0;
  for (auto n : names) {
    if (i++) out += i == names.size() ? " or " : ", ";
    out += "'" + std::string(n) + "'";
  }
  return out;
}

// The body of a block statement: `%}` ... up to one of end_tokens (consumed when drop_needle).
Result<StmtList> Parser::parse_body(Names end_tokens, bool drop_needle) {
  skip_op(":");
  QRT_TRY(expect_kind(TokenKind::kBlockEnd, "end of statement block"));
  QRT_ASSIGN_OR_RETURN(StmtList body, subparse(end_tokens));
  if (drop_needle) next();
  return body;
}

StmtPtr Parser::make_stmt(StmtKind kind, const Token& at) const {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = at.line;
  s->column = at.column;
  return s;
}

Result<StmtPtr> Parser::parse_statement(Names end_tokens) {
  const Token t = cur();
  if (t.kind != TokenKind::kName) return fail("tag name expected");
  const std::string& tag = t.text;
  if (tag == "for") return parse_for();
  if (tag == "if") return parse_if();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "filter") return parse_filter_block();
  if (tag == "with") return parse_with();
  if (tag == "print") return parse_print();
  if (tag == "generation") {
    next();
    auto s = make_stmt(StmtKind::kScope, t);
    QRT_ASSIGN_OR_RETURN(s->body, parse_body({"endgeneration"}, true));
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return fail("'" + tag + "' outside of a loop", t);
    next();
    return make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, t);
  }
  static const char* kUnsupportedTags[] = {"call", "block", "extends", "include", "import", "from",
                                           "autoescape", "trans", "do", "raw"};
  for (const char* unsupported_tag : kUnsupportedTags) {
    if (tag == unsupported_tag) {
      return unsupported(name_ + ":" + std::to_string(t.line) + ":" + std::to_string(t.column) + ": the '" +
                         tag + "' tag is not supported in chat templates");
    }
  }
  std::string message = "unknown tag '" + tag + "'";
  if (end_tokens.size() != 0) message += ", expected " + quoted(end_tokens);
  return fail(message, t);
}

Result<StmtPtr> Parser::parse_for() {
  auto s = make_stmt(StmtKind::kFor, cur());
  next();
  QRT_ASSIGN_OR_RETURN(s->target, parse_assign_target({"in"}, false));
  if (!skip_name("in")) return fail("expected token 'in', got '" + describe(cur()) + "'");
  QRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(false, {"recursive"}, false));
  if (skip_name("if")) {
    QRT_ASSIGN_OR_RETURN(s->condition, parse_expression(true));
  }
  if (is_name("recursive")) return unsupported(name_ + ": recursive for loops are not supported");
  ++loop_depth_;
  auto body = parse_body({"endfor", "else"}, false);
  --loop_depth_;
  if (!body.ok()) return body.status();
  s->body = std::move(body).value();
  const bool has_else = is_name("else");
  next();
  if (has_else) {
    QRT_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, true));
  }
  return s;
}

Result<StmtPtr> Parser::parse_if() {
  auto s = make_stmt(StmtKind::kIf, cur());
  next();
  while (true) {
    IfBranch branch;
    QRT_ASSIGN_OR_RETURN(branch.test, parse_tuple(false, {}, false));
    QRT_ASSIGN_OR_RETURN(branch.body, parse_body({"elif", "else", "endif"}, false));
    s->branches.push_back(std::move(branch));
    const std::string tag = cur().text;
    next();
    if (tag == "elif") continue;
    if (tag == "else") {
      IfBranch else_branch;
      QRT_ASSIGN_OR_RETURN(else_branch.body, parse_body({"endif"}, true));
      s->branches.push_back(std::move(else_branch));
    }
    return s;
  }
}

Result<StmtPtr> Parser::parse_set() {
  const Token at = cur();
  next();
  QRT_ASSIGN_OR_RETURN(Target target, parse_assign_target({}, true));
  if (skip_op("=")) {
    auto s = make_stmt(StmtKind::kSet, at);
    s->target = std::move(target);
    QRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, {}, false));
    return s;
  }
  auto s = make_stmt(StmtKind::kSetBlock, at);
  s->target = std::move(target);
  QRT_ASSIGN_OR_RETURN(s->filter, parse_filter(nullptr, false));
  QRT_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, true));
  return s;
}

Result<StmtPtr> Parser::parse_macro() {
  auto s = make_stmt(StmtKind::kMacro, cur());
  next();
  auto def = std::make_unique<MacroDef>();
  QRT_ASSIGN_OR_RETURN(def->name, expect_name());
  QRT_TRY(expect_op("("));
  while (!is_op(")")) {
    if (!def->params.empty()) QRT_TRY(expect_op(","));
    QRT_ASSIGN_OR_RETURN(std::string param, expect_name());
    if (skip_op("=")) {
      QRT_ASSIGN_OR_RETURN(ExprPtr d, parse_expression(true));
      def->defaults.push_back(std::move(d));
    } else if (!def->defaults.empty()) {
      return fail("non-default argument follows default argument");
    }
    def->params.push_back(std::move(param));
  }
  next();
  macros_.push_back(def.get());
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  auto body = parse_body({"endmacro"}, true);
  loop_depth_ = saved_loop_depth;
  macros_.pop_back();
  if (!body.ok()) return body.status();
  def->body = std::move(body).value();
  s->macro = std::move(def);
  return s;
}

Result<StmtPtr> Parser::parse_filter_block() {
  auto s = make_stmt(StmtKind::kFilterBlock, cur());
  next();
  QRT_ASSIGN_OR_RETURN(s->filter, parse_filter(nullptr, true));
  QRT_ASSIGN_OR_RETURN(s->body, parse_body({"endfilter"}, true));
  return s;
}

Result<StmtPtr> Parser::parse_with() {
  auto s = make_stmt(StmtKind::kWith, cur());
  next();
  while (cur().kind != TokenKind::kBlockEnd) {
    if (!s->assignments.empty()) QRT_TRY(expect_op(","));
    QRT_ASSIGN_OR_RETURN(Target target, parse_assign_target({}, false));
    QRT_TRY(expect_op("="));
    QRT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
    s->assignments.emplace_back(std::move(target), std::move(value));
  }
  QRT_ASSIGN_OR_RETURN(s->body, parse_body({"endwith"}, true));
  return s;
}

Result<StmtPtr> Parser::parse_print() {
  const Token at = cur();
  next();
  auto s = make_stmt(StmtKind::kOutput, at);
  QRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, {}, false));
  return s;
}

// A name, `ns.attr` (with_namespace) or a tuple of names, ended by a tag end or one of extra_end.
Result<Target> Parser::parse_assign_target(Names extra_end, bool with_namespace) {
  Target target;
  std::vector<Target> parts;
  bool is_tuple = false;
  while (true) {
    if (!parts.empty()) QRT_TRY(expect_op(","));
    if (is_tuple_end(extra_end)) break;
    if (cur().kind != TokenKind::kName) return fail("can't assign to '" + describe(cur()) + "'");
    Target part;
    part.name = cur().text;
    if (part.name == "true" || part.name == "false" || part.name == "none" || part.name == "True" ||
        part.name == "False" || part.name == "None") {
      return fail("can't assign to constant '" + part.name + "'");
    }
    next();
    if (with_namespace && is_op(".")) {
      next();
      part.kind = Target::Kind::kNamespaceAttr;
      QRT_ASSIGN_OR_RETURN(part.attr, expect_name());
    }
    parts.push_back(std::move(part));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (parts.empty()) return fail("expected an assignment target, got '" + describe(cur()) + "'");
  if (!is_tuple) return std::move(parts[0]);
  target.kind = Target::Kind::kTuple;
  for (auto& p : parts) {
    if (p.kind != Target::Kind::kName) return fail("can't unpack into a namespace attribute");
    target.names.push_back(std::move(p.name));
  }
  return target;
}

}  // namespace parsing

namespace {

using namespace ast;

// Jinja rejects unknown filters and tests when compiling, except inside conditional branches (if-statements and
// inline if-expressions), where the error waits until the branch runs.
class NameChecker {
 public:
  explicit NameChecker(const std::string& name) : name_(name) {}

  Status check_body(const StmtList& body, bool soft) {
    for (const auto& s : body) QRT_TRY(check_stmt(*s, soft));
    return ok_status();
  }

 private:
  Status check_stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::kOutput:
      case StmtKind::kSet: return check_expr(s.expr.get(), soft);
      case StmtKind::kIf:
        for (const auto& branch : s.branches) {
          QRT_TRY(check_expr(branch.test.get(), true));
          QRT_TRY(check_body(branch.body, true));
        }
        return ok_status();
      case StmtKind::kFor:
        QRT_TRY(check_expr(s.expr.get(), soft));
        QRT_TRY(check_expr(s.condition.get(), false));
        QRT_TRY(check_body(s.body, false));
        return check_body(s.else_body, false);
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock:
        QRT_TRY(check_expr(s.filter.get(), false));
        return check_body(s.body, false);
      case StmtKind::kMacro:
        for (const auto& d : s.macro->defaults) QRT_TRY(check_expr(d.get(), false));
        return check_body(s.macro->body, false);
      case StmtKind::kWith:
        for (const auto& [target, value] : s.assignments) QRT_TRY(check_expr(value.get(), soft));
        return check_body(s.body, false);
      case StmtKind::kScope: return check_body(s.body, false);
      default: return ok_status();
    }
  }

  Status check_expr(const Expr* e, bool soft) {
    if (!e) return ok_status();
    if (e->kind == ExprKind::kCondExpr) soft = true;
    if (!soft && (e->kind == ExprKind::kFilter || e->kind == ExprKind::kTest)) {
      const bool filter = e->kind == ExprKind::kFilter;
      const auto support = filter ? filter_support(e->name) : test_support(e->name);
      if (support == BuiltinSupport::kUnknown) {
        return format_error(name_ + ":" + std::to_string(e->line) + ":" + std::to_string(e->column) +
                            ": template syntax error: no " + (filter ? "filter" : "test") + " named '" +
                            e->name + "'");
      }
    }
    QRT_TRY(check_expr(e->node.get(), soft));
    QRT_TRY(check_expr(e->right.get(), soft));
    QRT_TRY(check_expr(e->other.get(), soft));
    QRT_TRY(check_expr(e->dyn_args.get(), soft));
    QRT_TRY(check_expr(e->dyn_kwargs.get(), soft));
    for (const auto& c : e->items) QRT_TRY(check_expr(c.get(), soft));
    for (const auto& c : e->args) QRT_TRY(check_expr(c.get(), soft));
    for (const auto& k : e->kwargs) QRT_TRY(check_expr(k.value.get(), soft));
    return ok_status();
  }

  const std::string& name_;
};

}  // namespace

Result<ast::Template> parse_template(std::string_view source, const std::string& template_name) {
  QRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source, LexerOptions{}, template_name));
  parsing::Parser parser(std::move(tokens), template_name);
  ast::Template tmpl;
  tmpl.name = template_name;
  QRT_ASSIGN_OR_RETURN(tmpl.body, parser.parse_all());
  NameChecker checker(template_name);
  QRT_TRY(checker.check_body(tmpl.body, false));
  return tmpl;
}

}  // namespace qrt::chat
