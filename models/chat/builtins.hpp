// The built-in filters, tests, methods and global functions templates can use.
#pragma once

#include <string>
#include <string_view>

#include "models/chat/value.hpp"

namespace qrt::chat {

enum class BuiltinSupport : uint8_t {
  kImplemented,
  kNotImplemented,  // exists in Jinja2 but not in this engine: an error only when evaluated
  kUnknown,         // not a Jinja2 name: like Jinja, an error at parse time outside conditional branches
};
BuiltinSupport filter_support(std::string_view name);
BuiltinSupport test_support(std::string_view name);

// Applies filter `name` to `input` (Jinja's {{ input | name(args) }}).
Result<Value> apply_filter(const std::string& name, const Value& input, CallArgs& args, Interpreter& interp);
// Evaluates test `name` on `input` (Jinja's `input is name(args)`).
Result<bool> apply_test(const std::string& name, const Value& input, CallArgs& args, Interpreter& interp);

// The attribute `name` of a str, list or dict that is one of its Python methods, as a bound method; undefined
// when the type has no such method.
Value method_attribute(const Value& object, const std::string& name);

// Adds range, namespace, dict, raise_exception and strftime_now to `globals`.
void add_global_functions(ValueDict& globals);

// Python's `str % args` formatting (%s %r %d %i %f %x %%, with flags, width and precision).
Result<std::string> percent_format(const std::string& format, const Value& args);

// Binds a call's arguments to parameters like Python does: positional first, then by keyword, then defaults.
// Each parameter may have a default (`has_default`); missing parameters without one are errors.
struct Param {
  const char* name;
  bool has_default = false;
  Value default_value;
};
Result<std::vector<Value>> bind_arguments(const std::string& function, CallArgs& args,
                                          const std::vector<Param>& params);

}  // namespace qrt::chat
