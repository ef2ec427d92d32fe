// The syntax tree of a parsed template. Expression and statement nodes are plain structs; which fields a node
// uses depends on its kind (written next to each field).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/chat/value.hpp"

namespace qrt::chat::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  kConst,     // constant
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // items: key, value, key, value, ...
  kGetattr,   // node.name
  kGetitem,   // node[right]; right may be a kSlice
  kSlice,     // items: start, stop, step (each may be null)
  kCall,      // node(args, kwargs, *dyn_args, **dyn_kwargs)
  kFilter,    // node | name(args...); node is null for the filter of {% filter %} and {% set x | f %}
  kTest,      // node is name(args...)
  kNeg,       // -node
  kPos,       // +node
  kBinary,    // node <binary_op> right
  kConcat,    // items joined with ~
  kCompare,   // node <ops[0]> items[0] <ops[1]> items[1] ... (chained like Python)
  kAnd,       // node and right
  kOr,        // node or right
  kNot,       // not node
  kCondExpr,  // node if right else other (other may be null)
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int column = 0;
  int depth = 1;  // height of this subtree, bounded by the parser so evaluation cannot exhaust the stack
  // Built only from literals, operators and context-free filters: Jinja evaluates such expressions when
  // compiling, with lenient slicing (undefined instead of an error); see Interpreter::eval.
  bool foldable = false;
  Value constant;
  std::string name;
  ExprPtr node;
  ExprPtr right;
  ExprPtr other;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> args;
  std::vector<Keyword> kwargs;
  ExprPtr dyn_args;
  ExprPtr dyn_kwargs;
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

// The left side of {% set %}, {% for %} and {% with %}.
struct Target {
  enum class Kind : uint8_t { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;                // kName; the namespace variable for kNamespaceAttr
  std::string attr;                // kNamespaceAttr
  std::vector<std::string> names;  // kTuple
};

struct IfBranch {
  ExprPtr test;  // null for else
  StmtList body;
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // defaults of the last defaults.size() params
  StmtList body;
  bool catch_kwargs = false;   // the body names `kwargs`: extra keyword arguments are collected there
  bool catch_varargs = false;  // the body names `varargs`: extra positional arguments are collected there
};

enum class StmtKind : uint8_t {
  kData,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (elif and else included, in order)
  kFor,          // for target in expr [if condition]: body, else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter]: body
  kMacro,        // macro
  kFilterBlock,  // filter: body
  kWith,         // with assignments: body
  kBreak,
  kContinue,
  kScope,        // a body rendered in its own scope ({% generation %})
};

struct Stmt {
  StmtKind kind = StmtKind::kData;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  std::vector<IfBranch> branches;
  StmtList body;
  StmtList else_body;
  Target target;
  ExprPtr condition;
  ExprPtr filter;
  std::unique_ptr<MacroDef> macro;
  std::vector<std::pair<Target, ExprPtr>> assignments;
};

struct Template {
  std::string name;
  StmtList body;
};

}  // namespace qrt::chat::ast
