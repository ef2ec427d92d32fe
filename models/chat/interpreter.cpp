#include "models/chat/interpreter.hpp"

#include <cmath>

#include "models/chat/builtins.hpp"
#include "models/chat/operators.hpp"
#include "models/chat/text.hpp"

namespace qrt::chat {

namespace {

using namespace ast;

const Value* lookup(const Scope* scope, const std::string& name) {
  for (; scope != nullptr; scope = scope->parent.get()) {
    auto it = scope->vars.find(name);
    if (it != scope->vars.end()) return &it->second;
  }
  return nullptr;
}

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

// Jinja's description of an object in "has no attribute" messages.
std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

std::string attribute_repr(const Value& key) {
  std::string out;
  if (!append_repr(out, key).ok()) return "?";
  return out;
}

class MacroCallable final : public Callable {
 public:
  MacroCallable(const MacroDef& def, std::shared_ptr<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string repr() const override { return "<Macro '" + def_.name + "'>"; }
  bool is_macro() const override { return true; }
  Result<Value> call(CallArgs& args, Interpreter& interp) override { return interp.call_macro(def_, closure_, args); }

 private:
  const MacroDef& def_;
  std::shared_ptr<Scope> closure_;
};

// Jinja's loop object. Like Jinja's LoopContext it is callable (only recursive loops may call it, which this
// engine does not support) and prints as <LoopContext index/length>.
class LoopContext final : public Callable {
 public:
  LoopContext(std::shared_ptr<const std::vector<Value>> items, int64_t index0)
      : items_(std::move(items)), index0_(index0) {}
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_->size()) + ">";
  }
  Result<Value> call(CallArgs&, Interpreter&) override {
    return invalid_argument("the loop must be marked as 'recursive' to call it");
  }
  Value attribute(const std::string& name) override;

 private:
  std::shared_ptr<const std::vector<Value>> items_;
  int64_t index0_;
};

// loop.cycle(a, b, ...): the argument at loop.index0 modulo their count.
class LoopCycle final : public Callable {
 public:
  explicit LoopCycle(int64_t index0) : index0_(index0) {}
  std::string repr() const override { return "<bound method LoopContext.cycle>"; }
  Result<Value> call(CallArgs& args, Interpreter&) override {
    if (args.positional.empty()) return invalid_argument("no items for cycling given");
    return args.positional[static_cast<size_t>(index0_) % args.positional.size()];
  }

 private:
  int64_t index0_;
};

Value LoopContext::attribute(const std::string& name) {
  const auto n = static_cast<int64_t>(items_->size());
  const int64_t i = index0_;
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    return i > 0 ? (*items_)[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*items_)[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
  }
  if (name == "cycle") return Value::callable(std::make_shared<LoopCycle>(i));
  return Value::undefined("'LoopContext' object has no attribute '" + name + "'");
}

}  // namespace

Interpreter::Interpreter(const Template& tmpl, const RenderLimits& limits, std::chrono::system_clock::time_point now)
    : tmpl_(tmpl), limits_(limits), now_(now) {}

Interpreter::~Interpreter() {
  for (auto& weak : macro_scopes_) {
    if (auto scope = weak.lock()) {
      std::vector<Value> values;
      for (auto& [name, v] : scope->vars) values.push_back(std::move(v));
      scope->vars.clear();
      release_deep(std::move(values));
    }
  }
}

Status Interpreter::error_at(int line, int column, ErrorCode code, const std::string& message) const {
  return Status(code, tmpl_.name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message);
}

Status Interpreter::located(const Expr& e, const Status& s) const {
  return error_at(e.line, e.column, s.code(), s.message());
}

Status Interpreter::step() {
  if (++steps_ > limits_.max_steps) {
    return out_of_range(tmpl_.name + ": rendering exceeded " + std::to_string(limits_.max_steps) + " steps");
  }
  return ok_status();
}

Status Interpreter::charge(size_t bytes) {
  total_bytes_ += bytes;
  if (total_bytes_ > limits_.max_total_bytes) {
    return out_of_range("rendering built more than " + std::to_string(limits_.max_total_bytes) + " bytes");
  }
  return ok_status();
}

Result<bool> Interpreter::would_cycle(const Value& container, const Value& item) {
  size_t visited = 0;
  const bool cycle = chat::would_cycle(container, item, &visited);
  steps_ += visited;
  if (steps_ > limits_.max_steps) {
    return out_of_range(tmpl_.name + ": rendering exceeded " + std::to_string(limits_.max_steps) + " steps");
  }
  return cycle;
}

Status Interpreter::enter_call() {
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    return out_of_range("calls nested deeper than " + std::to_string(limits_.max_call_depth));
  }
  return ok_status();
}

Result<std::string> Interpreter::render(std::shared_ptr<Scope> globals) {
  auto root = child_of(globals);
  std::string out;
  Status s = exec_body(tmpl_.body, root, out);
  // Break the reference cycles between macros and the scope that defines them.
  macro_scopes_.push_back(root);
  if (!s.ok()) return s;
  return out;
}

Status Interpreter::append_output(std::string& out, const Value& v) {
  const size_t before = out.size();
  QRT_TRY(append_str(out, v));
  if (out.size() > limits_.max_output_bytes) {
    return out_of_range(tmpl_.name + ": output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  return charge(out.size() - before);
}

Status Interpreter::exec_body(const StmtList& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& s : body) {
    QRT_TRY(exec(*s, scope, out));
    if (flow_ != Flow::kNormal) return ok_status();
  }
  return ok_status();
}

Status Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  QRT_TRY(step());
  switch (s.kind) {
    case StmtKind::kData: {
      if (out.size() + s.text.size() > limits_.max_output_bytes) {
        return out_of_range(tmpl_.name + ": output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
      }
      out += s.text;
      return charge(s.text.size());
    }
    case StmtKind::kOutput: {
      if (s.expr->foldable && s.expr->kind != ExprKind::kConst) {
        // Jinja prints a constant {{ }} expression's compile-time value, even an undefined one.
        folding_ = true;
        auto folded = eval(*s.expr, scope);
        folding_ = false;
        if (folded.ok()) return append_output(out, *folded);
      }
      QRT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
      return append_output(out, v);
    }
    case StmtKind::kIf:
      for (const auto& branch : s.branches) {
        if (branch.test) {
          QRT_ASSIGN_OR_RETURN(Value test, eval(*branch.test, scope));
          if (!truthy(test)) continue;
        }
        return exec_body(branch.body, scope, out);
      }
      return ok_status();
    case StmtKind::kFor: return exec_for(s, scope, out);
    case StmtKind::kSet: {
      QRT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
      return assign(s.target, std::move(v), *scope, s);
    }
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock: {
      std::string buffer;
      QRT_TRY(exec_body(s.body, child_of(scope), buffer));
      Value v = Value::string(std::move(buffer));
      if (s.filter) {
        QRT_ASSIGN_OR_RETURN(v, eval(*s.filter, scope, &v));
      }
      if (s.kind == StmtKind::kFilterBlock) return append_output(out, v);
      return assign(s.target, std::move(v), *scope, s);
    }
    case StmtKind::kMacro: {
      scope->vars[s.macro->name] = Value::callable(std::make_shared<MacroCallable>(*s.macro, scope));
      macro_scopes_.push_back(scope);
      return ok_status();
    }
    case StmtKind::kWith: {
      auto inner = child_of(scope);
      for (const auto& [target, expr] : s.assignments) {
        QRT_ASSIGN_OR_RETURN(Value v, eval(*expr, scope));
        QRT_TRY(assign(target, std::move(v), *inner, s));
      }
      return exec_body(s.body, inner, out);
    }
    case StmtKind::kScope: return exec_body(s.body, child_of(scope), out);
    case StmtKind::kBreak: flow_ = Flow::kBreak; return ok_status();
    case StmtKind::kContinue: flow_ = Flow::kContinue; return ok_status();
  }
  return internal_error("unknown statement kind");
}

Status Interpreter::assign(const Target& target, Value value, Scope& scope, const Stmt& at) {
  switch (target.kind) {
    case Target::Kind::kName: scope.vars[target.name] = std::move(value); return ok_status();
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = lookup(&scope, target.name);
      if (ns == nullptr || !ns->is_namespace()) {
        return error_at(at.line, at.column, ErrorCode::kInvalidArgument,
                        "cannot assign attribute on non-namespace object");
      }
      // A namespace referenced only by this variable cannot be inside the value, so the search is skipped.
      if (ns->use_count() > 1) {
        auto cycle = would_cycle(*ns, value);
        if (!cycle.ok()) return cycle.status();
        if (*cycle) {
          return error_at(at.line, at.column, ErrorCode::kUnsupported,
                          "assigning a namespace into itself would create a reference cycle");
        }
      }
      ns->dict().set_str(target.attr, std::move(value));
      return ok_status();
    }
    case Target::Kind::kTuple: {
      auto items = iterate_value(value);
      if (!items.ok()) return error_at(at.line, at.column, items.status().code(), items.status().message());
      const size_t n = target.names.size();
      if (items->size() != n) {
        return error_at(at.line, at.column, ErrorCode::kInvalidArgument,
                        items->size() > n ? "too many values to unpack (expected " + std::to_string(n) + ")"
                                          : "not enough values to unpack (expected " + std::to_string(n) +
                                                ", got " + std::to_string(items->size()) + ")");
      }
      for (size_t i = 0; i < n; ++i) scope.vars[target.names[i]] = std::move((*items)[i]);
      return ok_status();
    }
  }
  return internal_error("unknown assignment target");
}

Result<std::vector<Value>> Interpreter::iterate(const Value& v, const Expr& at) {
  if (v.is_undefined()) return std::vector<Value>{};
  auto items = iterate_value(v);
  if (!items.ok()) return located(at, items.status());
  return items;
}

Status Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  QRT_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, scope));
  QRT_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(iterable, *s.expr));
  if (s.condition) {
    // `for x in xs if cond`: the filter runs first, so loop.index and loop.length count kept items only.
    std::vector<Value> kept;
    for (auto& item : items) {
      QRT_TRY(step());
      auto probe = child_of(scope);
      QRT_TRY(assign(s.target, item, *probe, s));
      QRT_ASSIGN_OR_RETURN(Value keep, eval(*s.condition, probe));
      if (truthy(keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.else_body, child_of(scope), out);
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  const auto n = static_cast<int64_t>(shared_items->size());
  for (int64_t i = 0; i < n; ++i) {
    QRT_TRY(step());  // an iteration is work even when its body is empty
    auto body_scope = child_of(scope);
    QRT_TRY(assign(s.target, (*shared_items)[static_cast<size_t>(i)], *body_scope, s));
    body_scope->vars["loop"] = Value::callable(std::make_shared<LoopContext>(shared_items, i));
    QRT_TRY(exec_body(s.body, body_scope, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return ok_status();
}

Result<Value> Interpreter::call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs& args) {
  auto scope = child_of(closure);
  const size_t n = def.params.size();
  const size_t positional = std::min(args.positional.size(), n);
  std::vector<bool> provided(n, false);
  for (size_t i = 0; i < positional; ++i) {
    scope->vars[def.params[i]] = std::move(args.positional[i]);
    provided[i] = true;
  }
  auto& kwargs = args.keyword;
  if (positional != n) {
    // As in Jinja, keyword arguments are matched only to parameters not already filled positionally.
    for (size_t i = positional; i < n; ++i) {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == def.params[i]) {
          scope->vars[def.params[i]] = std::move(it->second);
          provided[i] = true;
          kwargs.erase(it);
          break;
        }
      }
    }
  }
  if (def.catch_kwargs) {
    Value extra = Value::new_dict();
    for (auto& [name, v] : kwargs) extra.dict().set_str(name, std::move(v));
    scope->vars["kwargs"] = std::move(extra);
  } else if (!kwargs.empty()) {
    return invalid_argument("macro '" + def.name + "' takes no keyword argument '" + kwargs.front().first + "'");
  }
  if (def.catch_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(std::move(args.positional[i]));
    scope->vars["varargs"] = Value::tuple(std::move(rest));
  } else if (args.positional.size() > n) {
    return invalid_argument("macro '" + def.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  }
  const size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (provided[i]) continue;
    if (i >= first_default) {
      QRT_ASSIGN_OR_RETURN(Value d, eval(*def.defaults[i - first_default], scope));
      scope->vars[def.params[i]] = std::move(d);
    } else {
      scope->vars[def.params[i]] = Value::undefined("parameter '" + def.params[i] + "' was not provided");
    }
  }
  std::string out;
  QRT_TRY(exec_body(def.body, scope, out));
  flow_ = Flow::kNormal;
  return Value::string(std::move(out));
}

Result<Value> Interpreter::call_value(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_callable()) return invalid_argument("'" + type_name(fn) + "' object is not callable");
  QRT_TRY(enter_call());
  auto result = fn.fn().call(args, *this);
  leave_call();
  return result;
}

Result<Value> Interpreter::get_attr(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case ValueKind::kUndefined: return undefined_error(object);
    case ValueKind::kCallable: {
      Value attr = object.fn().attribute(name);
      if (!attr.is_undefined()) return attr;
      break;
    }
    case ValueKind::kDict:
      if (object.is_namespace()) {
        if (const Value* v = object.dict().find_str(name)) return *v;
        return Value::undefined("'Namespace' object has no attribute '" + name + "'");
      }
      [[fallthrough]];
    case ValueKind::kString:
    case ValueKind::kList: {
      // Python attributes (methods) come before dict keys: `d.items` is the method even with an "items" key.
      Value method = method_attribute(object, name);
      if (!method.is_undefined()) return method;
      if (object.is_dict()) {
        if (const Value* v = object.dict().find_str(name)) return *v;
      }
      break;
    }
    default: break;
  }
  return Value::undefined("'" + object_description(object) + "' has no attribute '" + name + "'");
}

Result<Value> Interpreter::get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) return undefined_error(object);
  auto missing = [&] {
    // Jinja's wording: "'dict object' has no attribute 'x'" for names, "list object has no element 5" otherwise.
    if (key.is_string()) return Value::undefined("'" + object_description(object) + "' has no attribute " + attribute_repr(key));
    return Value::undefined(object_description(object) + " has no element " + attribute_repr(key));
  };
  switch (object.kind()) {
    case ValueKind::kList:
    case ValueKind::kString: {
      if (key.is_integral() && (object.is_string() || object.is_sequence_list())) {
        const bool is_string = object.is_string();
        std::vector<size_t> offsets;
        int64_t n = 0;
        if (is_string) {
          offsets = text::codepoint_offsets(object.as_string());
          n = static_cast<int64_t>(offsets.size()) - 1;
        } else {
          n = static_cast<int64_t>(object.list().items.size());
        }
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return missing();
        const auto k = static_cast<size_t>(i);
        if (!is_string) return object.list().items[k];
        // Markup's __getitem__ returns Markup.
        return Value::string(object.as_string().substr(offsets[k], offsets[k + 1] - offsets[k]), object.is_markup());
      }
      break;
    }
    case ValueKind::kDict:
      if (!object.is_namespace()) {
        auto found = object.dict().find(key);
        if (found.ok() && *found != nullptr) return **found;
      }
      break;
    default: break;
  }
  // Jinja falls back to the attribute of that name (so d['items'] on a dict without the key is its method).
  if (key.is_string()) {
    QRT_ASSIGN_OR_RETURN(Value attr, get_attr(object, key.as_string()));
    if (!attr.is_undefined()) return attr;
  }
  return missing();
}

Result<CallArgs> Interpreter::eval_args(const Expr& e, const std::shared_ptr<Scope>& scope) {
  CallArgs args;
  for (const auto& a : e.args) {
    QRT_ASSIGN_OR_RETURN(Value v, eval(*a, scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& k : e.kwargs) {
    QRT_ASSIGN_OR_RETURN(Value v, eval(*k.value, scope));
    args.keyword.emplace_back(k.name, std::move(v));
  }
  if (e.dyn_args) {
    QRT_ASSIGN_OR_RETURN(Value v, eval(*e.dyn_args, scope));
    auto items = iterate_value(v);
    if (!items.ok()) return located(*e.dyn_args, items.status());
    for (auto& item : *items) args.positional.push_back(std::move(item));
  }
  if (e.dyn_kwargs) {
    QRT_ASSIGN_OR_RETURN(Value v, eval(*e.dyn_kwargs, scope));
    if (!v.is_mapping()) return error_at(e.line, e.column, ErrorCode::kInvalidArgument, "** argument must be a mapping");
    for (const auto& [key, item] : v.dict().entries()) {
      if (!key.is_string()) return error_at(e.line, e.column, ErrorCode::kInvalidArgument, "keywords must be strings");
      args.keyword.emplace_back(key.as_string(), item);
    }
  }
  return args;
}

Result<Value> Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  QRT_ASSIGN_OR_RETURN(Value left, eval(*e.node, scope));
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    QRT_ASSIGN_OR_RETURN(Value right, eval(*e.items[i], scope));
    Result<bool> r = false;
    switch (e.compare_ops[i]) {
      case CompareOp::kEq: r = equal(left, right); break;
      case CompareOp::kNe: r = !equal(left, right); break;
      case CompareOp::kLt: r = less(left, right); break;
      case CompareOp::kGt: r = less(right, left); break;
      case CompareOp::kLe:
      case CompareOp::kGe: {
        const bool le = e.compare_ops[i] == CompareOp::kLe;
        r = less(le ? left : right, le ? right : left);
        if (r.ok() && !*r) r = equal(left, right);
        break;
      }
      case CompareOp::kIn: r = contains(right, left); break;
      case CompareOp::kNotIn:
        r = contains(right, left);
        if (r.ok()) r = !*r;
        break;
    }
    if (!r.ok()) return located(e, r.status());
    if (!*r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Interpreter::eval_slice(const Expr& e, const Value& object, const std::shared_ptr<Scope>& scope) {
  Value bounds[3] = {Value::none(), Value::none(), Value::none()};
  for (int k = 0; k < 3; ++k) {
    if (e.items[static_cast<size_t>(k)]) {
      QRT_ASSIGN_OR_RETURN(bounds[k], eval(*e.items[static_cast<size_t>(k)], scope));
    }
  }
  auto r = slice_value(object, bounds[0], bounds[1], bounds[2]);
  if (!r.ok()) return located(e, r.status());
  return r;
}

namespace {

// Jinja's has_safe_repr: the values its compiler may embed as constants.
bool has_safe_repr(const Value& v) {
  if (v.is_undefined() || v.is_callable() || v.is_lazy() || v.is_view() || v.is_namespace()) return false;
  if (v.is_list()) {
    for (const Value& item : v.list().items) {
      if (!has_safe_repr(item)) return false;
    }
  } else if (v.is_dict()) {
    for (const auto& [key, item] : v.dict().entries()) {
      if (!has_safe_repr(key) || !has_safe_repr(item)) return false;
    }
  }
  return true;
}

}  // namespace

Result<Value> Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* block_input) {
  QRT_TRY(step());
  if (folding_ && !e.foldable) return unsupported("not a constant expression");
  if (e.foldable && !folding_ && e.kind != ExprKind::kConst) {
    // Jinja's optimizer evaluates constant subexpressions while compiling, where item access is lenient (a bad
    // slice gives Undefined, not TypeError), and keeps the value when it can be embedded as a constant.
    folding_ = true;
    auto folded = eval(e, scope, block_input);
    folding_ = false;
    if (folded.ok() && has_safe_repr(*folded)) return folded;
  }
  switch (e.kind) {
    case ExprKind::kConst: return e.constant;
    case ExprKind::kName: {
      if (const Value* v = lookup(scope.get(), e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) {
        QRT_ASSIGN_OR_RETURN(Value v, eval(*item, scope));
        items.push_back(std::move(v));
      }
      return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Value d = Value::new_dict();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        QRT_ASSIGN_OR_RETURN(Value key, eval(*e.items[i], scope));
        QRT_ASSIGN_OR_RETURN(Value value, eval(*e.items[i + 1], scope));
        Status s = d.dict().set(std::move(key), std::move(value));
        if (!s.ok()) return located(*e.items[i], s);
      }
      return d;
    }
    case ExprKind::kGetattr: {
      QRT_ASSIGN_OR_RETURN(Value object, eval(*e.node, scope));
      auto r = get_attr(object, e.name);
      if (!r.ok()) return located(e, r.status());
      return r;
    }
    case ExprKind::kGetitem: {
      QRT_ASSIGN_OR_RETURN(Value object, eval(*e.node, scope));
      if (e.right->kind == ExprKind::kSlice) {
        auto sliced = eval_slice(*e.right, object, scope);
        if (!sliced.ok() && folding_ && !object.is_undefined()) {
          return Value::undefined(object_description(object) + " has no element slice");
        }
        return sliced;
      }
      QRT_ASSIGN_OR_RETURN(Value key, eval(*e.right, scope));
      auto r = get_item(object, key);
      if (!r.ok()) return located(e, r.status());
      return r;
    }
    case ExprKind::kSlice:
      return error_at(e.line, e.column, ErrorCode::kInternal, "slice outside of a subscript");
    case ExprKind::kCall: {
      QRT_ASSIGN_OR_RETURN(Value fn, eval(*e.node, scope));
      QRT_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
      auto r = call_value(fn, args);
      // Errors from a macro body already carry their own location.
      if (!r.ok() && !(fn.is_callable() && fn.fn().is_macro())) return located(e, r.status());
      return r;
    }
    case ExprKind::kFilter: {
      Value input;
      if (e.node) {
        QRT_ASSIGN_OR_RETURN(input, eval(*e.node, scope, block_input));
      } else if (block_input) {
        input = *block_input;
      }
      QRT_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
      auto r = apply_filter(e.name, input, args, *this);
      if (!r.ok()) return located(e, r.status());
      return r;
    }
    case ExprKind::kTest: {
      QRT_ASSIGN_OR_RETURN(Value input, eval(*e.node, scope));
      QRT_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
      auto r = apply_test(e.name, input, args, *this);
      if (!r.ok()) return located(e, r.status());
      return Value::boolean(*r);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      QRT_ASSIGN_OR_RETURN(Value v, eval(*e.node, scope));
      auto r = unary_op(v, e.kind == ExprKind::kNeg);
      if (!r.ok()) return located(e, r.status());
      return r;
    }
    case ExprKind::kBinary: {
      QRT_ASSIGN_OR_RETURN(Value a, eval(*e.node, scope));
      QRT_ASSIGN_OR_RETURN(Value b, eval(*e.right, scope));
      if (e.binary_op == ast::BinaryOp::kPow && !folding_ && e.node->foldable && !e.right->foldable &&
          ((a.is_int() && a.as_int() < 0) || (a.is_float() && std::signbit(a.as_float())))) {
        // Jinja compiles a constant left operand into its Python literal without parentheses, and Python reads
        // "-2 ** x" as -(2 ** x): the sign applies after the power.
        auto r = unary_op(a, /*negative=*/true);
        if (r.ok()) r = binary_op(e.binary_op, *r, b, *this);
        if (r.ok()) r = unary_op(*r, /*negative=*/true);
        if (!r.ok()) return located(e, r.status());
        return r;
      }
      auto r = binary_op(e.binary_op, a, b, *this);
      if (!r.ok()) return located(e, r.status());
      return r;
    }
    case ExprKind::kConcat: {
      std::string joined;
      for (const auto& part : e.items) {
        QRT_ASSIGN_OR_RETURN(Value v, eval(*part, scope));
        Status s = append_str(joined, v);
        if (s.ok() && joined.size() > limits_.max_output_bytes) s = out_of_range("string too long");
        if (s.ok()) s = charge(joined.size());
        if (!s.ok()) return located(e, s);
      }
      return Value::string(std::move(joined));
    }
    case ExprKind::kCompare: return eval_compare(e, scope);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      QRT_ASSIGN_OR_RETURN(Value left, eval(*e.node, scope));
      const bool t = truthy(left);
      if ((e.kind == ExprKind::kAnd) != t) return left;  // `a and b` is a when falsy; `a or b` is a when truthy
      return eval(*e.right, scope);
    }
    case ExprKind::kNot: {
      QRT_ASSIGN_OR_RETURN(Value v, eval(*e.node, scope));
      return Value::boolean(!truthy(v));
    }
    case ExprKind::kCondExpr: {
      QRT_ASSIGN_OR_RETURN(Value test, eval(*e.right, scope));
      if (truthy(test)) return eval(*e.node, scope);
      if (e.other) return eval(*e.other, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined");
    }
  }
  return internal_error("unknown expression kind");
}

}  // namespace qrt::chat
