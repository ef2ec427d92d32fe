// Evaluates a parsed template with Jinja2's semantics: scoping (for-loop bodies, macros, {% set %} blocks and
// {% with %} get their own scope; if-branches do not), Undefined, Python operators, macros with defaults and
// keyword arguments, loop variables, break/continue. Everything it does is bounded by RenderLimits, so hostile
// templates end with an error instead of exhausting time, memory or the stack.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/chat/ast.hpp"
#include "models/chat/value.hpp"

namespace qrt::chat {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string or list built on the way
  size_t max_total_bytes = size_t{1} << 30;    // everything built while rendering, summed
  uint64_t max_steps = 20'000'000;             // statements and expressions evaluated
  int max_call_depth = 200;                    // nested macro and function calls
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};

class Interpreter {
 public:
  Interpreter(const ast::Template& tmpl, const RenderLimits& limits, std::chrono::system_clock::time_point now);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders the template with `globals` (context variables and global functions) as the outermost scope.
  Result<std::string> render(std::shared_ptr<Scope> globals);

  // ---- services for the built-in filters, tests and functions ----
  Result<Value> call_value(const Value& fn, CallArgs& args);
  // Jinja's attribute and item access: dict keys, Python methods, Undefined for what is missing.
  Result<Value> get_attr(const Value& object, const std::string& name);
  Result<Value> get_item(const Value& object, const Value& key);
  // Accounts for `bytes` of new strings or lists; errors past the limits.
  Status charge(size_t bytes);
  const RenderLimits& limits() const { return limits_; }
  std::chrono::system_clock::time_point now() const { return now_; }
  // Whether inserting `item` into `container` would create a reference cycle; the search counts as work.
  Result<bool> would_cycle(const Value& container, const Value& item);
  // Counts nested native calls (filters that apply filters, ...) against the call depth.
  Status enter_call();
  void leave_call() { --call_depth_; }

  // Called by macros.
  Result<Value> call_macro(const ast::MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs& args);

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  Status exec_body(const ast::StmtList& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Status exec(const ast::Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Status exec_for(const ast::Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Status assign(const ast::Target& target, Value value, Scope& scope, const ast::Stmt& at);
  Status append_output(std::string& out, const Value& v);

  Result<Value> eval(const ast::Expr& e, const std::shared_ptr<Scope>& scope, const Value* block_input = nullptr);
  Result<Value> eval_binary(const ast::Expr& e, const Value& a, const Value& b);
  Result<Value> eval_compare(const ast::Expr& e, const std::shared_ptr<Scope>& scope);
  Result<Value> eval_slice(const ast::Expr& e, const Value& object, const std::shared_ptr<Scope>& scope);
  Result<CallArgs> eval_args(const ast::Expr& e, const std::shared_ptr<Scope>& scope);
  Result<std::vector<Value>> iterate(const Value& v, const ast::Expr& at);

  Status step();
  Status located(const ast::Expr& e, const Status& s) const;
  Status error_at(int line, int column, ErrorCode code, const std::string& message) const;

  const ast::Template& tmpl_;
  RenderLimits limits_;
  std::chrono::system_clock::time_point now_;
  uint64_t steps_ = 0;
  size_t total_bytes_ = 0;
  int call_depth_ = 0;
  Flow flow_ = Flow::kNormal;
  bool folding_ = false;  // evaluating a constant expression as Jinja's compiler does (see eval)
  // Scopes that define macros: a macro holds its defining scope, which holds the macro. Their variables are
  // cleared after rendering to break those reference cycles.
  std::vector<std::weak_ptr<Scope>> macro_scopes_;
};

}  // namespace qrt::chat
