// The values a chat template computes with: a small model of the Python objects Jinja works on.
//
// Kinds: undefined (Jinja's Undefined: prints as "", is falsy, iterates as empty, fails on attribute access and
// arithmetic), none, bool, int (int64), float, string (UTF-8, with a "markup" flag for markupsafe.Markup, which
// escapes plain strings concatenated to it), list (also tuples and lazy iterators), dict (insertion-ordered; also
// Jinja's namespace objects) and callables (macros, built-in functions, bound methods).
// Lists and dicts are shared by reference like Python's, so `ns.items.append(x)` is seen through every alias.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qrt/status.hpp"

namespace qrt::chat {

class Interpreter;
class Value;
struct ValueList;
class ValueDict;
class Callable;

enum class ValueKind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

class Value {
 public:
  Value() = default;  // undefined, with no explanation
  static Value undefined(std::string why);  // why: the message an operation on it fails with
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  // A Python iterator (filter results such as map/select): no len(), no indexing, always truthy.
  static Value lazy(std::vector<Value> items);
  // dict.keys() / values() / items(): sized and iterable, but not indexable, not JSON, printed as dict_keys([...]).
  enum class DictView : uint8_t { kNone, kKeys, kValues, kItems };
  static Value dict_view(std::vector<Value> items, DictView view);
  static Value list_ref(std::shared_ptr<ValueList> list);
  static Value dict(std::shared_ptr<ValueDict> dict);
  static Value new_dict();
  static Value new_namespace();
  static Value callable(std::shared_ptr<Callable> fn);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  // bool is an int in Python: True + 1 == 2.
  bool is_integral() const { return kind_ == ValueKind::kInt || kind_ == ValueKind::kBool; }
  bool is_number() const { return is_integral() || kind_ == ValueKind::kFloat; }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_list() const { return kind_ == ValueKind::kList; }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_callable() const { return kind_ == ValueKind::kCallable; }
  bool is_tuple() const;
  bool is_lazy() const;
  bool is_view() const;
  // A list, tuple or view whose items can be counted (not a lazy iterator).
  bool is_sized_list() const { return is_list() && !is_lazy(); }
  // A real list or tuple: indexable and sliceable.
  bool is_sequence_list() const { return is_list() && !is_lazy() && !is_view(); }
  bool is_namespace() const;
  bool is_mapping() const { return is_dict() && !is_namespace(); }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // for bool and int
  double as_float() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }
  bool is_markup() const { return markup_; }
  const std::string& undefined_reason() const { return str_; }

  ValueList& list() const { return *std::static_pointer_cast<ValueList>(ptr_); }
  ValueDict& dict() const { return *std::static_pointer_cast<ValueDict>(ptr_); }
  Callable& fn() const { return *std::static_pointer_cast<Callable>(ptr_); }
  const void* identity() const { return ptr_.get(); }  // Python's `is` for shared objects
  long use_count() const { return ptr_.use_count(); }

 private:
  friend void release_deep(std::vector<Value> pending);
  ValueKind kind_ = ValueKind::kUndefined;
  bool markup_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string str_;
  std::shared_ptr<void> ptr_;
};

struct ValueList {
  std::vector<Value> items;
  bool is_tuple = false;
  bool is_lazy = false;
  Value::DictView view = Value::DictView::kNone;
  ~ValueList();
};

class ValueDict {
 public:
  ~ValueDict();
  // Lookup by Python equality of keys (1 == 1.0 == True). Unhashable keys are errors.
  Result<const Value*> find(const Value& key) const;
  const Value* find_str(std::string_view key) const;
  Status set(Value key, Value value);
  void set_str(std::string key, Value value);
  Result<bool> erase(const Value& key);
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  bool is_namespace = false;

 private:
  friend void release_deep(std::vector<Value> pending);
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // hash key -> position in entries_
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string repr() const = 0;
  virtual Result<Value> call(CallArgs& args, Interpreter& interp) = 0;
  virtual bool is_macro() const { return false; }
  // The object a bound method belongs to (followed by cycle checks and deep release), or null.
  virtual Value* bound_object() { return nullptr; }
  // Attributes of callable objects that have them (Jinja's loop object: loop.index, ...); undefined otherwise.
  virtual Value attribute(const std::string& name) { return Value::undefined("no attribute '" + name + "'"); }
};

// Destroys values without recursion, so that a deeply nested list cannot overflow the stack when freed.
void release_deep(std::vector<Value> pending);

// The key a dict files `key` under: Python-equal keys map to the same string. Errors for unhashable values.
Result<std::string> hash_key(const Value& key);

// Python's type name, for error messages: 'str', 'int', 'NoneType', 'list', 'dict', 'Undefined', ...
std::string type_name(const Value& v);

// Python truthiness.
bool truthy(const Value& v);
// Python ==, with Undefined equal only to Undefined.
bool equal(const Value& a, const Value& b);
// Python's a < b; errors for types that do not order (str < int, None < 1, ...).
Result<bool> less(const Value& a, const Value& b);

// str(v) as Python prints it ("None", "True", "1.0", "['a', 1]"); Undefined prints as "".
Status append_str(std::string& out, const Value& v);
Result<std::string> to_str(const Value& v);
// repr(v).
Status append_repr(std::string& out, const Value& v);
// Python's float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string format_float(double f);

// Whether putting `item` into `container` would make a container reach itself (a cycle Python would allow but
// that this engine refuses, so that every value can be printed and freed). *visited receives the number of
// values examined, which callers charge to their work budget.
bool would_cycle(const Value& container, const Value& item, size_t* visited);

// Deepest container nesting these algorithms follow before giving up (Python raises RecursionError too).
inline constexpr int kMaxValueDepth = 512;

}  // namespace qrt::chat
