#include "models/chat/operators.hpp"

#include <cmath>
#include <limits>

#include "models/chat/builtins.hpp"
#include "models/chat/interpreter.hpp"
#include "models/chat/text.hpp"

namespace qrt::chat {

namespace {

const char* op_symbol(ast::BinaryOp op) {
  switch (op) {
    case ast::BinaryOp::kAdd: return "+";
    case ast::BinaryOp::kSub: return "-";
    case ast::BinaryOp::kMul: return "*";
    case ast::BinaryOp::kDiv: return "/";
    case ast::BinaryOp::kFloorDiv: return "//";
    case ast::BinaryOp::kMod: return "%";
    case ast::BinaryOp::kPow: return "**";
  }
  return "?";
}

Status unsupported_operands(ast::BinaryOp op, const Value& a, const Value& b) {
  return invalid_argument(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
                          "' and '" + type_name(b) + "'");
}

Status overflow() { return out_of_range("integer result does not fit in 64 bits"); }

Result<Value> repeat_string(const Value& s, int64_t times, Interpreter& interp) {
  if (times <= 0 || s.as_string().empty()) return Value::string("", s.is_markup());
  const size_t size = s.as_string().size();
  if (static_cast<uint64_t>(times) > interp.limits().max_output_bytes / size) {
    return out_of_range("string repetition would exceed " + std::to_string(interp.limits().max_output_bytes) +
                        " bytes");
  }
  QRT_TRY(interp.charge(size * static_cast<size_t>(times)));
  std::string out;
  out.reserve(size * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out += s.as_string();
  return Value::string(std::move(out), s.is_markup());
}

Result<Value> repeat_list(const Value& l, int64_t times, Interpreter& interp) {
  const auto& items = l.list().items;
  std::vector<Value> out;
  if (times > 0 && !items.empty()) {
    const size_t limit = interp.limits().max_output_bytes / sizeof(Value);
    if (static_cast<uint64_t>(times) > limit / items.size()) return out_of_range("list repetition too large");
    QRT_TRY(interp.charge(items.size() * static_cast<size_t>(times) * sizeof(Value)));
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  }
  return l.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Result<Value> add(const Value& a, const Value& b, Interpreter& interp) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r = 0;
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return overflow();
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_float() + b.as_float());
  if (a.is_string() && b.is_string()) {
    // markupsafe.Markup escapes the plain string it is concatenated with.
    const bool markup = a.is_markup() || b.is_markup();
    const std::string left = (markup && !a.is_markup()) ? text::html_escape(a.as_string()) : a.as_string();
    const std::string right = (markup && !b.is_markup()) ? text::html_escape(b.as_string()) : b.as_string();
    if (left.size() + right.size() > interp.limits().max_output_bytes) {
      return out_of_range("string concatenation exceeds " + std::to_string(interp.limits().max_output_bytes) +
                          " bytes");
    }
    QRT_TRY(interp.charge(left.size() + right.size()));
    return Value::string(left + right, markup);
  }
  if (a.is_sequence_list() && b.is_sequence_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    if ((x.size() + y.size()) * sizeof(Value) > interp.limits().max_output_bytes) {
      return out_of_range("list concatenation too large");
    }
    QRT_TRY(interp.charge((x.size() + y.size()) * sizeof(Value)));
    std::vector<Value> out(x);
    out.insert(out.end(), y.begin(), y.end());
    return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if ((a.is_string() && !a.is_markup()) || a.is_sequence_list()) {
    const std::string t = a.is_string() ? "str" : type_name(a);
    return invalid_argument("can only concatenate " + t + " (not \"" + type_name(b) + "\") to " + t);
  }
  return unsupported_operands(ast::BinaryOp::kAdd, a, b);
}

Result<Value> multiply(const Value& a, const Value& b, Interpreter& interp) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return overflow();
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_float() * b.as_float());
  const Value& seq = a.is_integral() ? b : a;
  const Value& times = a.is_integral() ? a : b;
  if (times.is_integral()) {
    if (seq.is_string()) return repeat_string(seq, times.as_int(), interp);
    if (seq.is_sequence_list()) return repeat_list(seq, times.as_int(), interp);
  }
  if ((a.is_string() || a.is_list()) && !b.is_integral() && !b.is_undefined()) {
    return invalid_argument("can't multiply sequence by non-int of type '" + type_name(b) + "'");
  }
  return unsupported_operands(ast::BinaryOp::kMul, a, b);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's float divmod: the remainder takes the divisor's sign.
void float_divmod(double a, double b, double* div, double* mod) {
  double m = std::fmod(a, b);
  double d = (a - m) / b;
  if (m != 0.0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      d -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  double floordiv = 0.0;
  if (d != 0.0) {
    floordiv = std::floor(d);
    if (d - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  *div = floordiv;
  *mod = m;
}

Result<Value> divide(ast::BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return unsupported_operands(op, a, b);
  const bool integral = a.is_integral() && b.is_integral();
  if (op == ast::BinaryOp::kDiv) {
    if (b.as_float() == 0.0) return invalid_argument("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (integral) {
    if (b.as_int() == 0) return invalid_argument("integer division or modulo by zero");
    if (a.as_int() == std::numeric_limits<int64_t>::min() && b.as_int() == -1) return overflow();
    if (op == ast::BinaryOp::kFloorDiv) return Value::integer(floor_div(a.as_int(), b.as_int()));
    int64_t r = a.as_int() % b.as_int();
    if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();
    return Value::integer(r);
  }
  if (b.as_float() == 0.0) {
    return invalid_argument(op == ast::BinaryOp::kFloorDiv ? "float floor division by zero" : "float modulo");
  }
  double div = 0;
  double mod = 0;
  float_divmod(a.as_float(), b.as_float(), &div, &mod);
  return Value::number(op == ast::BinaryOp::kFloorDiv ? div : mod);
}

Result<Value> power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return unsupported_operands(ast::BinaryOp::kPow, a, b);
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    int64_t base = a.as_int();
    int64_t exp = b.as_int();
    int64_t result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) return overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
    }
    return Value::integer(result);
  }
  const double x = a.as_float();
  const double y = b.as_float();
  if (x == 0.0 && y < 0) return invalid_argument("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) return unsupported("a negative number raised to a fractional power is complex");
  return Value::number(std::pow(x, y));
}

}  // namespace

Status undefined_error(const Value& v) {
  return invalid_argument(v.undefined_reason().empty() ? "undefined value" : v.undefined_reason());
}

Result<Value> binary_op(ast::BinaryOp op, const Value& a, const Value& b, Interpreter& interp) {
  if (a.is_undefined()) return undefined_error(a);
  // Python tries str % x before x's reflected operator, so formatting with an Undefined argument succeeds.
  if (b.is_undefined() && !(op == ast::BinaryOp::kMod && a.is_string())) return undefined_error(b);
  switch (op) {
    case ast::BinaryOp::kAdd: return add(a, b, interp);
    case ast::BinaryOp::kSub:
      if (a.is_integral() && b.is_integral()) {
        int64_t r = 0;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return overflow();
        return Value::integer(r);
      }
      if (a.is_number() && b.is_number()) return Value::number(a.as_float() - b.as_float());
      return unsupported_operands(op, a, b);
    case ast::BinaryOp::kMul: return multiply(a, b, interp);
    case ast::BinaryOp::kMod:
      if (a.is_string()) {
        QRT_ASSIGN_OR_RETURN(std::string formatted, percent_format(a.as_string(), b));
        QRT_TRY(interp.charge(formatted.size()));
        return Value::string(std::move(formatted), a.is_markup());
      }
      return divide(op, a, b);
    case ast::BinaryOp::kDiv:
    case ast::BinaryOp::kFloorDiv: return divide(op, a, b);
    case ast::BinaryOp::kPow: return power(a, b);
  }
  return internal_error("unknown binary operator");
}

Result<Value> unary_op(const Value& v, bool negative) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_integral()) {
    if (!negative) return Value::integer(v.as_int());
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::number(negative ? -v.as_float() : v.as_float());
  return invalid_argument(std::string("bad operand type for unary ") + (negative ? "-" : "+") + ": '" +
                          type_name(v) + "'");
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined: return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        return invalid_argument("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::kList: {
      // dict.keys() and dict.items() look the key up by hash, as the dict does: an unhashable key is an error.
      const Value::DictView view = container.list().view;
      const Value* key = nullptr;
      if (view == Value::DictView::kKeys) {
        key = &item;
      } else if (view == Value::DictView::kItems && item.is_tuple() && item.list().items.size() == 2) {
        key = &item.list().items[0];
      }
      if (key) {
        auto hashed = hash_key(*key);
        if (!hashed.ok()) return hashed.status();
      }
      for (const Value& x : container.list().items) {
        if (equal(x, item)) return true;
      }
      return false;
    }
    case ValueKind::kDict:
      if (!container.is_namespace()) {
        QRT_ASSIGN_OR_RETURN(const Value* found, container.dict().find(item));
        return found != nullptr;
      }
      break;
    default: break;
  }
  return invalid_argument("argument of type '" + type_name(container) + "' is not iterable");
}

namespace {

Result<bool> slice_bound(const Value& v, int64_t* out) {
  if (v.is_none()) return false;
  if (!v.is_integral()) {
    return invalid_argument("slice indices must be integers or None or have an __index__ method");
  }
  *out = v.as_int();
  return true;
}

}  // namespace

Result<Value> slice_value(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (object.is_undefined()) return undefined_error(object);
  int64_t step = 1;
  QRT_ASSIGN_OR_RETURN(bool has_step, slice_bound(step_v, &step));
  (void)has_step;
  if (step == 0) return invalid_argument("slice step cannot be zero");
  int64_t start = 0;
  int64_t stop = 0;
  QRT_ASSIGN_OR_RETURN(bool has_start, slice_bound(start_v, &start));
  QRT_ASSIGN_OR_RETURN(bool has_stop, slice_bound(stop_v, &stop));

  const bool is_string = object.is_string();
  // Jinja compiles slices to a plain Python subscript, so slicing anything but a sequence is an error.
  if (object.is_dict() && !object.is_namespace()) return invalid_argument("unhashable type: 'slice'");
  if (!is_string && !object.is_sequence_list()) {
    return invalid_argument("'" + type_name(object) + "' object is not subscriptable");
  }
  std::vector<size_t> offsets;
  int64_t length = 0;
  if (is_string) {
    offsets = text::codepoint_offsets(object.as_string());
    length = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    length = static_cast<int64_t>(object.list().items.size());
  }
  // PySlice_AdjustIndices
  const int64_t lower = step < 0 ? -1 : 0;
  const int64_t upper = step < 0 ? length - 1 : length;
  auto adjust = [&](bool has, int64_t v, int64_t if_missing) {
    if (!has) return if_missing;
    if (v < 0) {
      v += length;
      if (v < lower) v = lower;
    } else if (v > upper) {
      v = upper;
    }
    return v;
  };
  start = adjust(has_start, start, step < 0 ? upper : lower);
  stop = adjust(has_stop, stop, step < 0 ? lower : upper);

  std::vector<int64_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(i);
  if (is_string) {
    const std::string& s = object.as_string();
    std::string out;
    for (int64_t i : picks) {
      const auto k = static_cast<size_t>(i);
      out.append(s, offsets[k], offsets[k + 1] - offsets[k]);
    }
    return Value::string(std::move(out), object.is_markup());
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(object.list().items[static_cast<size_t>(i)]);
  return object.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Result<std::vector<Value>> iterate_value(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return std::vector<Value>{};
    case ValueKind::kList: return v.list().items;
    case ValueKind::kDict:
      if (!v.is_namespace()) {
        std::vector<Value> keys;
        keys.reserve(v.dict().size());
        for (const auto& [key, item] : v.dict().entries()) keys.push_back(key);
        return keys;
      }
      break;
    case ValueKind::kString: {
      std::vector<Value> chars;
      for (auto& c : text::codepoints(v.as_string())) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default: break;
  }
  return invalid_argument("'" + type_name(v) + "' object is not iterable");
}

Result<int64_t> length_of(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return int64_t{0};
    case ValueKind::kString: return static_cast<int64_t>(text::codepoint_count(v.as_string()));
    case ValueKind::kList:
      if (!v.is_lazy()) return static_cast<int64_t>(v.list().items.size());
      break;
    case ValueKind::kDict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.dict().size());
      break;
    default: break;
  }
  return invalid_argument("object of type '" + type_name(v) + "' has no len()");
}

}  // namespace qrt::chat
