// Expression parsing: Jinja2's operator precedence, literals, attribute/item access, calls, filters and tests.
#include "models/chat/parser_impl.hpp"

namespace qrt::chat::parsing {

bool Parser::is_tuple_end(Names extra_end) const {
  const auto k = cur().kind;
  if (k == TokenKind::kVariableEnd || k == TokenKind::kBlockEnd || k == TokenKind::kEof) return true;
  if (is_op(")")) return true;
  return extra_end.size() != 0 && is_name_in(extra_end);
}

Result<ExprPtr> Parser::parse_tuple(bool with_condexpr, Names extra_end, bool explicit_parentheses) {
  const Token at = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) QRT_TRY(expect_op(","));
    if (is_tuple_end(extra_end)) break;
    QRT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(with_condexpr));
    items.push_back(std::move(item));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return fail("expected an expression, got '" + describe(cur()) + "'");
  }
  auto e = make(ExprKind::kTuple, at);
  e->items = std::move(items);
  QRT_TRY(seal(*e));
  return e;
}

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting) return fail("expression nested too deeply");
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> Parser::parse_condexpr() {
  const Token at = cur();
  QRT_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (skip_name("if")) {
    auto e = make(ExprKind::kCondExpr, at);
    e->node = std::move(expr);
    QRT_ASSIGN_OR_RETURN(e->right, parse_or());
    if (skip_name("else")) {
      QRT_ASSIGN_OR_RETURN(e->other, parse_condexpr());
    }
    QRT_TRY(seal(*e));
    expr = std::move(e);
  }
  return expr;
}

template <class Operand>
Result<ExprPtr> Parser::parse_logical(std::string_view keyword, ExprKind kind, Operand operand) {
  const Token at = cur();
  QRT_ASSIGN_OR_RETURN(ExprPtr left, operand());
  while (skip_name(keyword)) {
    auto e = make(kind, at);
    e->node = std::move(left);
    QRT_ASSIGN_OR_RETURN(e->right, operand());
    QRT_TRY(seal(*e));
    left = std::move(e);
  }
  return left;
}

Result<ExprPtr> Parser::parse_or() {
  return parse_logical("or", ExprKind::kOr, [this] { return parse_and(); });
}

Result<ExprPtr> Parser::parse_and() {
  return parse_logical("and", ExprKind::kAnd, [this] { return parse_not(); });
}

Result<ExprPtr> Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting) return fail("expression nested too deeply");
  auto e = make(ExprKind::kNot, cur());
  next();
  QRT_ASSIGN_OR_RETURN(e->node, parse_not());
  QRT_TRY(seal(*e));
  return e;
}

Result<ExprPtr> Parser::parse_compare() {
  const Token at = cur();
  QRT_ASSIGN_OR_RETURN(ExprPtr expr, parse_math1());
  std::vector<CompareOp> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    static const std::pair<const char*, CompareOp> kOps[] = {{"==", CompareOp::kEq}, {"!=", CompareOp::kNe},
                                                             {"<", CompareOp::kLt},  {"<=", CompareOp::kLe},
                                                             {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
    bool found = false;
    for (const auto& [spelling, op] : kOps) {
      if (is_op(spelling)) {
        next();
        ops.push_back(op);
        found = true;
        break;
      }
    }
    if (!found) {
      if (skip_name("in")) {
        ops.push_back(CompareOp::kIn);
      } else if (is_name("not") && look().kind == TokenKind::kName && look().text == "in") {
        next();
        next();
        ops.push_back(CompareOp::kNotIn);
      } else {
        break;
      }
    }
    QRT_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    operands.push_back(std::move(operand));
  }
  if (ops.empty()) return expr;
  auto e = make(ExprKind::kCompare, at);
  e->node = std::move(expr);
  e->items = std::move(operands);
  e->compare_ops = std::move(ops);
  QRT_TRY(seal(*e));
  return e;
}

template <class Operand>
Result<ExprPtr> Parser::parse_binary(std::initializer_list<std::pair<const char*, BinaryOp>> ops, Operand operand) {
  const Token at = cur();
  QRT_ASSIGN_OR_RETURN(ExprPtr left, operand());
  while (true) {
    const std::pair<const char*, BinaryOp>* match = nullptr;
    for (const auto& op : ops) {
      if (is_op(op.first)) match = &op;
    }
    if (!match) return left;
    next();
    auto e = make(ExprKind::kBinary, at);
    e->binary_op = match->second;
    e->node = std::move(left);
    QRT_ASSIGN_OR_RETURN(e->right, operand());
    QRT_TRY(seal(*e));
    left = std::move(e);
  }
}

Result<ExprPtr> Parser::parse_math1() {
  return parse_binary({{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}}, [this] { return parse_concat(); });
}

Result<ExprPtr> Parser::parse_concat() {
  const Token at = cur();
  QRT_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (!is_op("~")) return first;
  auto e = make(ExprKind::kConcat, at);
  e->items.push_back(std::move(first));
  while (skip_op("~")) {
    QRT_ASSIGN_OR_RETURN(ExprPtr part, parse_math2());
    e->items.push_back(std::move(part));
  }
  QRT_TRY(seal(*e));
  return e;
}

Result<ExprPtr> Parser::parse_math2() {
  return parse_binary(
      {{"*", BinaryOp::kMul}, {"/", BinaryOp::kDiv}, {"//", BinaryOp::kFloorDiv}, {"%", BinaryOp::kMod}},
      [this] { return parse_pow(); });
}

Result<ExprPtr> Parser::parse_pow() {
  return parse_binary({{"**", BinaryOp::kPow}}, [this] { return parse_unary(true); });
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting) return fail("expression nested too deeply");
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    auto e = make(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur());
    next();
    QRT_ASSIGN_OR_RETURN(e->node, parse_unary(false));
    QRT_TRY(seal(*e));
    node = std::move(e);
  } else {
    QRT_ASSIGN_OR_RETURN(node, parse_primary());
  }
  QRT_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    QRT_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token t = cur();
  switch (t.kind) {
    case TokenKind::kName: {
      next();
      auto e = make(ExprKind::kConst, t);
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        e->constant = Value::boolean(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        e->constant = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->foldable = false;
        e->name = t.text;
        if (!macros_.empty() && t.text == "kwargs") macros_.back()->catch_kwargs = true;
        if (!macros_.empty() && t.text == "varargs") macros_.back()->catch_varargs = true;
      }
      return e;
    }
    case TokenKind::kString: {
      auto e = make(ExprKind::kConst, t);
      std::string joined;
      while (cur().kind == TokenKind::kString) {  // adjacent literals concatenate, as in Python
        joined += cur().text;
        next();
      }
      e->constant = Value::string(std::move(joined));
      return e;
    }
    case TokenKind::kInteger: {
      next();
      auto e = make(ExprKind::kConst, t);
      e->constant = Value::integer(t.int_value);
      return e;
    }
    case TokenKind::kFloat: {
      next();
      auto e = make(ExprKind::kConst, t);
      e->constant = Value::number(t.float_value);
      return e;
    }
    default: break;
  }
  if (skip_op("(")) {
    QRT_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(true, {}, true));
    QRT_TRY(expect_op(")"));
    return inner;
  }
  if (is_op("[") || is_op("{")) {
    const bool is_list = is_op("[");
    auto e = make(is_list ? ExprKind::kList : ExprKind::kDict, t);
    next();
    const char* close = is_list ? "]" : "}";
    while (!is_op(close)) {
      if (!e->items.empty()) QRT_TRY(expect_op(","));
      if (is_op(close)) break;
      QRT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
      e->items.push_back(std::move(item));
      if (!is_list) {
        QRT_TRY(expect_op(":"));
        QRT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
        e->items.push_back(std::move(value));
      }
    }
    next();
    QRT_TRY(seal(*e));
    return e;
  }
  return fail("unexpected '" + describe(t) + "'");
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      QRT_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (is_op("(")) {
      QRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      QRT_ASSIGN_OR_RETURN(node, parse_filter(std::move(node), false));
    } else if (is_name("is")) {
      QRT_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (is_op("(")) {
      QRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  const Token t = cur();
  next();
  // Access and call nodes take the position of the expression they apply to, where errors read best.
  const Token at = position_of(*node);
  if (t.text == ".") {
    const Token attr = cur();
    next();
    if (attr.kind == TokenKind::kName) {
      auto e = make(ExprKind::kGetattr, at);
      e->node = std::move(node);
      e->name = attr.text;
      QRT_TRY(seal(*e));
      return e;
    }
    if (attr.kind != TokenKind::kInteger) return fail("expected name or number", attr);
    auto e = make(ExprKind::kGetitem, at);
    e->node = std::move(node);
    e->right = make(ExprKind::kConst, attr);
    e->right->constant = Value::integer(attr.int_value);
    QRT_TRY(seal(*e));
    return e;
  }
  std::vector<ExprPtr> keys;
  while (!is_op("]")) {
    if (!keys.empty()) QRT_TRY(expect_op(","));
    QRT_ASSIGN_OR_RETURN(ExprPtr key, parse_subscribed());
    keys.push_back(std::move(key));
  }
  next();
  auto e = make(ExprKind::kGetitem, at);
  e->node = std::move(node);
  if (keys.size() == 1) {
    e->right = std::move(keys[0]);
  } else {
    e->right = make(ExprKind::kTuple, t);
    e->right->items = std::move(keys);
    QRT_TRY(seal(*e->right));
  }
  QRT_TRY(seal(*e));
  return e;
}

Result<ExprPtr> Parser::parse_subscribed() {
  const Token at = cur();
  auto slice = make(ExprKind::kSlice, at);
  slice->items.resize(3);
  if (skip_op(":")) {
    // [:...]
  } else {
    QRT_ASSIGN_OR_RETURN(ExprPtr start, parse_expression(true));
    if (!skip_op(":")) return start;
    slice->items[0] = std::move(start);
  }
  auto bound_follows = [&] { return !is_op(":") && !is_op("]") && !is_op(","); };
  if (bound_follows()) {
    QRT_ASSIGN_OR_RETURN(slice->items[1], parse_expression(true));
  }
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) {
      QRT_ASSIGN_OR_RETURN(slice->items[2], parse_expression(true));
    }
  }
  QRT_TRY(seal(*slice));
  return slice;
}

Status Parser::parse_call_args(Expr& e) {
  const Token at = cur();
  QRT_TRY(expect_op("("));
  bool require_comma = false;
  auto invalid = [&] { return fail("invalid syntax for function call expression", at); };
  while (!is_op(")")) {
    if (require_comma) {
      QRT_TRY(expect_op(","));
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      if (e.dyn_args || e.dyn_kwargs) return invalid();
      QRT_ASSIGN_OR_RETURN(e.dyn_args, parse_expression(true));
    } else if (skip_op("**")) {
      if (e.dyn_kwargs) return invalid();
      QRT_ASSIGN_OR_RETURN(e.dyn_kwargs, parse_expression(true));
    } else if (cur().kind == TokenKind::kName && look().kind == TokenKind::kOperator && look().text == "=") {
      if (e.dyn_kwargs) return invalid();
      Keyword kw;
      kw.name = cur().text;
      next();
      next();
      QRT_ASSIGN_OR_RETURN(kw.value, parse_expression(true));
      e.kwargs.push_back(std::move(kw));
    } else {
      if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty()) return invalid();
      QRT_ASSIGN_OR_RETURN(ExprPtr arg, parse_expression(true));
      e.args.push_back(std::move(arg));
    }
    require_comma = true;
  }
  next();
  return ok_status();
}

Result<ExprPtr> Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::kCall, position_of(*node));
  e->node = std::move(node);
  QRT_TRY(parse_call_args(*e));
  QRT_TRY(seal(*e));
  return e;
}

Result<std::string> Parser::parse_dotted_name() {
  QRT_ASSIGN_OR_RETURN(std::string n, expect_name());
  while (skip_op(".")) {
    QRT_ASSIGN_OR_RETURN(std::string part, expect_name());
    n += "." + part;
  }
  return n;
}

// `| name(args)` repeated; node may be null (filter blocks). Returns node unchanged when no filter follows.
Result<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    auto e = make(ExprKind::kFilter, cur());
    QRT_ASSIGN_OR_RETURN(e->name, parse_dotted_name());
    if (is_op("(")) QRT_TRY(parse_call_args(*e));
    e->node = std::move(node);
    QRT_TRY(seal(*e));
    node = std::move(e);
  }
  return node;
}

Result<ExprPtr> Parser::parse_test(ExprPtr node) {
  const Token at = cur();
  next();
  const bool negated = skip_name("not");
  auto e = make(ExprKind::kTest, at);
  QRT_ASSIGN_OR_RETURN(e->name, parse_dotted_name());
  e->node = std::move(node);
  const auto k = cur().kind;
  if (is_op("(")) {
    QRT_TRY(parse_call_args(*e));
  } else if ((k == TokenKind::kName || k == TokenKind::kString || k == TokenKind::kInteger ||
              k == TokenKind::kFloat || is_op("[") || is_op("{")) &&
             !is_name_in({"else", "or", "and"})) {
    if (is_name("is")) return fail("you cannot chain multiple tests with 'is'");
    QRT_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    QRT_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    e->args.push_back(std::move(arg));
  }
  QRT_TRY(seal(*e));
  if (!negated) return e;
  auto n = make(ExprKind::kNot, at);
  n->node = std::move(e);
  QRT_TRY(seal(*n));
  return n;
}

}  // namespace qrt::chat::parsing
