// Python's operators on template values: arithmetic, string and list concatenation and repetition, `in`,
// slicing and iteration, with Python's results and TypeError messages. Integers are 64-bit: an overflow is an
// error rather than Python's arbitrary precision.
#pragma once

#include <vector>

#include "models/chat/ast.hpp"
#include "models/chat/value.hpp"

namespace qrt::chat {

class Interpreter;

// The error an operation on an undefined value fails with ("'x' is undefined").
Status undefined_error(const Value& v);

Result<Value> binary_op(ast::BinaryOp op, const Value& a, const Value& b, Interpreter& interp);
// Unary minus (negative) or plus.
Result<Value> unary_op(const Value& v, bool negative);
// `item in container`.
Result<bool> contains(const Value& container, const Value& item);
// object[start:stop:step]; each bound may be none. Strings slice by code point.
Result<Value> slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for-loop (or list()) sees: list items, dict keys, string code points, nothing for Undefined.
Result<std::vector<Value>> iterate_value(const Value& v);
// len(v); errors for values without a length (generators, numbers, None).
Result<int64_t> length_of(const Value& v);

}  // namespace qrt::chat
