// Python methods of str, list and dict that templates call, Jinja's global functions (range, namespace, dict),
// transformers' globals (raise_exception, strftime_now), %-formatting and argument binding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <unordered_set>

#include "models/chat/builtins.hpp"
#include "models/chat/interpreter.hpp"
#include "models/chat/operators.hpp"
#include "models/chat/text.hpp"

namespace qrt::chat {

Result<std::vector<Value>> bind_arguments(const std::string& function, CallArgs& args,
                                          const std::vector<Param>& params) {
  if (args.positional.size() > params.size()) {
    return invalid_argument(function + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                            std::to_string(args.positional.size()) + " given)");
  }
  std::vector<Value> out(params.size());
  std::vector<bool> filled(params.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    filled[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && name != params[i].name) ++i;
    if (i == params.size()) return invalid_argument(function + "() got an unexpected keyword argument '" + name + "'");
    if (filled[i]) return invalid_argument(function + "() got multiple values for argument '" + name + "'");
    out[i] = value;
    filled[i] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (filled[i]) continue;
    if (!params[i].has_default) {
      return invalid_argument(function + "() missing required argument '" + std::string(params[i].name) + "'");
    }
    out[i] = params[i].default_value;
  }
  return out;
}

namespace {

Param opt(const char* name, Value v) { return Param{name, true, std::move(v)}; }
Param req(const char* name) { return Param{name, false, Value()}; }

Result<std::string> string_arg(const std::string& function, const Value& v) {
  if (!v.is_string()) return invalid_argument(function + "() argument must be str, not " + type_name(v));
  return v.as_string();
}

Value string_list(const std::vector<std::string>& parts, bool markup = false) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::string(p, markup));
  return Value::list(std::move(items));
}

// Code point index of byte offset `byte` in s (for find/index results).
int64_t codepoint_index(const std::string& s, size_t byte) {
  return static_cast<int64_t>(text::codepoint_count(std::string_view(s).substr(0, byte)));
}

Result<Value> strip_method(const std::string& s, bool markup, CallArgs& args, const char* name, text::StripSide side) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {opt("chars", Value::none())}));
  if (p[0].is_none()) return Value::string(std::string(text::strip_space(s, side)), markup);
  QRT_ASSIGN_OR_RETURN(std::string chars, string_arg(name, p[0]));
  return Value::string(std::string(text::strip_chars(s, chars, side)), markup);
}

Result<Value> split_method(const std::string& s, bool markup, CallArgs& args, bool from_right) {
  const char* name = from_right ? "rsplit" : "split";
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {opt("sep", Value::none()), opt("maxsplit", Value::integer(-1))}));
  if (!p[1].is_integral()) return invalid_argument(std::string(name) + "() maxsplit must be an integer");
  const int64_t maxsplit = p[1].as_int();
  if (p[0].is_none()) {
    return string_list(from_right ? text::rsplit_space(s, maxsplit) : text::split_space(s, maxsplit), markup);
  }
  QRT_ASSIGN_OR_RETURN(std::string sep, string_arg(name, p[0]));
  if (sep.empty()) return invalid_argument("empty separator");
  return string_list(from_right ? text::rsplit_sep(s, sep, maxsplit) : text::split_sep(s, sep, maxsplit), markup);
}

Result<Value> affix_method(const std::string& s, CallArgs& args, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("affix"), opt("start", Value::none()), opt("end", Value::none())}));
  std::string subject = s;
  if (!p[1].is_none() || !p[2].is_none()) {
    QRT_ASSIGN_OR_RETURN(Value sliced, slice_value(Value::string(s), p[1], p[2], Value::none()));
    subject = sliced.as_string();
  }
  std::vector<Value> candidates;
  if (p[0].is_tuple()) {
    candidates = p[0].list().items;
  } else {
    candidates.push_back(p[0]);
  }
  for (const Value& c : candidates) {
    QRT_ASSIGN_OR_RETURN(std::string affix, string_arg(name, c));
    if (affix.size() > subject.size()) continue;
    if (prefix ? subject.compare(0, affix.size(), affix) == 0
               : subject.compare(subject.size() - affix.size(), affix.size(), affix) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

template <class Pred>
Value all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return Value::boolean(false);
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = text::decode_at(s, i, &len);
    if (!pred(cp)) return Value::boolean(false);
    i += len;
  }
  return Value::boolean(true);
}

Result<Value> call_string_method(const Value& self, const std::string& name, CallArgs& args, Interpreter& interp) {
  const std::string& s = self.as_string();
  const bool markup = self.is_markup();
  auto no_args = [&]() { return bind_arguments(name, args, {}).status(); };
  if (name == "strip") return strip_method(s, markup, args, "strip", text::StripSide::kBoth);
  if (name == "lstrip") return strip_method(s, markup, args, "lstrip", text::StripSide::kLeft);
  if (name == "rstrip") return strip_method(s, markup, args, "rstrip", text::StripSide::kRight);
  // Markup's methods return Markup.
  if (name == "split") return split_method(s, markup, args, false);
  if (name == "rsplit") return split_method(s, markup, args, true);
  if (name == "startswith") return affix_method(s, args, true);
  if (name == "endswith") return affix_method(s, args, false);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "casefold") {
    QRT_TRY(no_args());
    if (name == "upper") return Value::string(text::upper(s), markup);
    if (name == "title") return Value::string(text::title(s), markup);
    if (name == "capitalize") return Value::string(text::capitalize(s), markup);
    return Value::string(text::lower(s), markup);
  }
  if (name == "splitlines") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {opt("keepends", Value::boolean(false))}));
    return string_list(text::splitlines(s, truthy(p[0])), markup);
  }
  if (name == "replace") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("old"), req("new"), opt("count", Value::integer(-1))}));
    QRT_ASSIGN_OR_RETURN(std::string old_text, string_arg(name, p[0]));
    QRT_ASSIGN_OR_RETURN(std::string new_text, string_arg(name, p[1]));
    if (!p[2].is_integral()) return invalid_argument("replace() count must be an integer");
    // Markup.replace escapes the replacement (not the text searched for) and returns Markup.
    if (markup && !p[1].is_markup()) new_text = text::html_escape(new_text);
    if (text::replaced_size(s, old_text, new_text, p[2].as_int()) > interp.limits().max_output_bytes) {
      return out_of_range("replace() result too large");
    }
    std::string out = text::replace(s, old_text, new_text, p[2].as_int());
    QRT_TRY(interp.charge(out.size()));
    return Value::string(std::move(out), markup);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("sub")}));
    QRT_ASSIGN_OR_RETURN(std::string sub, string_arg(name, p[0]));
    if (name == "count") return Value::integer(static_cast<int64_t>(text::count(s, sub)));
    const size_t at = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") return invalid_argument("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(codepoint_index(s, at));
  }
  if (name == "join") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("iterable")}));
    QRT_ASSIGN_OR_RETURN(auto items, iterate_value(p[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return invalid_argument("sequence item " + std::to_string(i) + ": expected str instance, " +
                                type_name(items[i]) + " found");
      }
      if (i) out += s;
      out += items[i].as_string();
      if (out.size() > interp.limits().max_output_bytes) return out_of_range("join() result too large");
    }
    QRT_TRY(interp.charge(out.size()));
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("affix")}));
    QRT_ASSIGN_OR_RETURN(std::string affix, string_arg(name, p[0]));
    if (affix.size() <= s.size()) {
      if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) return Value::string(s.substr(affix.size()));
      if (name == "removesuffix" && s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
        return Value::string(s.substr(0, s.size() - affix.size()));
      }
    }
    return Value::string(s);
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    QRT_TRY(no_args());
    return all_chars(s, [](uint32_t c) { return c >= '0' && c <= '9'; });
  }
  if (name == "isalpha") {
    QRT_TRY(no_args());
    return all_chars(s, [](uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; });
  }
  if (name == "isalnum") {
    QRT_TRY(no_args());
    return all_chars(s, [](uint32_t c) { return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9'); });
  }
  if (name == "isspace") {
    QRT_TRY(no_args());
    return all_chars(s, [](uint32_t c) { return text::is_python_space(c); });
  }
  if (name == "islower" || name == "isupper") {
    QRT_TRY(no_args());
    const std::string other = name == "islower" ? text::lower(s) : text::upper(s);
    const bool cased = text::lower(s) != text::upper(s);
    return Value::boolean(cased && other == s);
  }
  return unsupported("the str method '" + name + "' is not supported");
}

Result<Value> call_list_method(const Value& self, const std::string& name, CallArgs& args, Interpreter& interp) {
  auto& items = self.list().items;
  const bool mutating = name == "append" || name == "extend" || name == "insert" || name == "pop" ||
                        name == "remove" || name == "clear" || name == "reverse" || name == "sort";
  if (mutating && self.is_tuple()) return invalid_argument("'tuple' object has no attribute '" + name + "'");
  auto check_insert = [&](const Value& v) -> Status {
    QRT_ASSIGN_OR_RETURN(bool cycle, interp.would_cycle(self, v));
    if (cycle) return unsupported("inserting a list into itself would create a reference cycle");
    if ((items.size() + 1) * sizeof(Value) > interp.limits().max_output_bytes) return out_of_range("list too long");
    return interp.charge(sizeof(Value));
  };
  if (name == "append") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("object")}));
    QRT_TRY(check_insert(p[0]));
    items.push_back(p[0]);
    return Value::none();
  }
  if (name == "extend") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("iterable")}));
    QRT_ASSIGN_OR_RETURN(auto more, iterate_value(p[0]));
    for (auto& v : more) {
      QRT_TRY(check_insert(v));
      items.push_back(std::move(v));
    }
    return Value::none();
  }
  if (name == "insert") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("index"), req("object")}));
    if (!p[0].is_integral()) return invalid_argument("insert() index must be an integer");
    QRT_TRY(check_insert(p[1]));
    const auto n = static_cast<int64_t>(items.size());
    int64_t i = p[0].as_int();
    if (i < 0) i = std::max<int64_t>(0, i + n);
    i = std::min(i, n);
    items.insert(items.begin() + i, p[1]);
    return Value::none();
  }
  if (name == "pop") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {opt("index", Value::integer(-1))}));
    if (!p[0].is_integral()) return invalid_argument("pop() index must be an integer");
    const auto n = static_cast<int64_t>(items.size());
    if (n == 0) return out_of_range("pop from empty list");
    int64_t i = p[0].as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return out_of_range("pop index out of range");
    Value v = std::move(items[static_cast<size_t>(i)]);
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "remove" || name == "index" || name == "count") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("value")}));
    int64_t hits = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equal(items[i], p[0])) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      if (name == "remove") {
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
        return Value::none();
      }
      ++hits;
    }
    if (name == "count") return Value::integer(hits);
    return invalid_argument("list." + name + "(x): x not in list");
  }
  if (name == "copy") {
    QRT_TRY(bind_arguments(name, args, {}).status());
    return Value::list(items);
  }
  if (name == "clear") {
    QRT_TRY(bind_arguments(name, args, {}).status());
    release_deep(std::move(items));
    items.clear();
    return Value::none();
  }
  if (name == "reverse") {
    QRT_TRY(bind_arguments(name, args, {}).status());
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  return unsupported("the list method '" + name + "' is not supported");
}

Result<Value> call_dict_method(const Value& self, const std::string& name, CallArgs& args, Interpreter& interp) {
  ValueDict& d = self.dict();
  if (name == "get") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("key"), opt("default", Value::none())}));
    QRT_ASSIGN_OR_RETURN(const Value* found, d.find(p[0]));
    return found ? *found : p[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    QRT_TRY(bind_arguments(name, args, {}).status());
    std::vector<Value> out;
    for (const auto& [key, value] : d.entries()) {
      out.push_back(name == "items" ? Value::tuple({key, value}) : name == "keys" ? key : value);
    }
    return Value::dict_view(std::move(out), name == "items"  ? Value::DictView::kItems
                                            : name == "keys" ? Value::DictView::kKeys
                                                             : Value::DictView::kValues);
  }
  if (name == "copy") {
    QRT_TRY(bind_arguments(name, args, {}).status());
    Value copy = Value::new_dict();
    for (const auto& [key, value] : d.entries()) QRT_TRY(copy.dict().set(key, value));
    return copy;
  }
  if (name == "pop") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("key"), opt("default", Value())}));
    QRT_ASSIGN_OR_RETURN(const Value* found, d.find(p[0]));
    if (!found) {
      if (!p[1].is_undefined() || args.positional.size() + args.keyword.size() > 1) return p[1];
      std::string key;
      QRT_TRY(append_repr(key, p[0]));
      return invalid_argument("KeyError: " + key);
    }
    Value v = *found;
    QRT_TRY(d.erase(p[0]).status());
    return v;
  }
  if (name == "setdefault") {
    QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("key"), opt("default", Value::none())}));
    QRT_ASSIGN_OR_RETURN(const Value* found, d.find(p[0]));
    if (found) return *found;
    QRT_ASSIGN_OR_RETURN(bool cycle, interp.would_cycle(self, p[1]));
    if (cycle) return unsupported("inserting a dict into itself would create a reference cycle");
    QRT_TRY(interp.charge(sizeof(Value) * 2));
    QRT_TRY(d.set(p[0], p[1]));
    return p[1];
  }
  if (name == "update") {
    if (args.positional.size() > 1) return invalid_argument("update expected at most 1 argument");
    std::vector<std::pair<Value, Value>> pairs;
    if (!args.positional.empty()) {
      const Value& other = args.positional[0];
      if (!other.is_mapping()) return unsupported("dict.update() accepts a mapping");
      pairs = other.dict().entries();
    }
    for (auto& [key, value] : args.keyword) pairs.emplace_back(Value::string(key), value);
    for (auto& [key, value] : pairs) {
      QRT_ASSIGN_OR_RETURN(bool cycle, interp.would_cycle(self, value));
      if (cycle) return unsupported("inserting a dict into itself would create a reference cycle");
      QRT_TRY(interp.charge(sizeof(Value) * 2));
      QRT_TRY(d.set(key, value));
    }
    return Value::none();
  }
  return unsupported("the dict method '" + name + "' is not supported");
}

class BoundMethod final : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string repr() const override {
    return "<built-in method " + name_ + " of " + type_name(self_) + " object>";
  }
  Value* bound_object() override { return &self_; }
  Result<Value> call(CallArgs& args, Interpreter& interp) override {
    if (self_.is_string()) return call_string_method(self_, name_, args, interp);
    if (self_.is_list()) return call_list_method(self_, name_, args, interp);
    if (self_.is_dict()) return call_dict_method(self_, name_, args, interp);
    return internal_error("method bound to an unexpected value");
  }

 private:
  Value self_;
  std::string name_;
};

bool is_python_method(const Value& object, const std::string& name) {
  static const std::unordered_set<std::string> kStr = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
      "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
      "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
      "translate", "upper", "zfill"};
  static const std::unordered_set<std::string> kList = {"append", "clear", "copy", "count", "extend", "index",
                                                        "insert", "pop", "remove", "reverse", "sort"};
  static const std::unordered_set<std::string> kTuple = {"count", "index"};
  static const std::unordered_set<std::string> kDict = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                                        "pop", "popitem", "setdefault", "update", "values"};
  if (object.is_string()) return kStr.count(name) != 0;
  if (object.is_sequence_list()) return (object.is_tuple() ? kTuple : kList).count(name) != 0;
  if (object.is_mapping()) return kDict.count(name) != 0;
  return false;
}

// A global function implemented natively.
class NativeFunction final : public Callable {
 public:
  using Fn = Result<Value> (*)(CallArgs&, Interpreter&);
  NativeFunction(const char* name, Fn fn) : name_(name), fn_(fn) {}
  std::string repr() const override { return std::string("<function ") + name_ + ">"; }
  Result<Value> call(CallArgs& args, Interpreter& interp) override { return fn_(args, interp); }

 private:
  const char* name_;
  Fn fn_;
};

// The sandbox Jinja uses for chat templates refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

Result<Value> global_range(CallArgs& args, Interpreter& interp) {
  if (!args.keyword.empty()) return invalid_argument("range() takes no keyword arguments");
  const auto& a = args.positional;
  if (a.empty() || a.size() > 3) return invalid_argument("range expected 1 to 3 arguments");
  for (const Value& v : a) {
    if (!v.is_integral()) return invalid_argument("'" + type_name(v) + "' object cannot be interpreted as an integer");
  }
  const int64_t start = a.size() == 1 ? 0 : a[0].as_int();
  const int64_t stop = a.size() == 1 ? a[0].as_int() : a[1].as_int();
  const int64_t step = a.size() == 3 ? a[2].as_int() : 1;
  if (step == 0) return invalid_argument("range() arg 3 must not be zero");
  const long double count = step > 0 ? std::ceil((static_cast<long double>(stop) - start) / step)
                                     : std::ceil((static_cast<long double>(start) - stop) / -static_cast<long double>(step));
  if (count > kMaxRange) {
    return out_of_range("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  if (count > 0) {
    QRT_TRY(interp.charge(static_cast<size_t>(count) * sizeof(Value)));
    for (int64_t i = 0, v = start; i < static_cast<int64_t>(count); ++i, v += step) items.push_back(Value::integer(v));
  }
  return Value::list(std::move(items));
}

Result<Value> fill_mapping(Value target, CallArgs& args, const char* name) {
  if (args.positional.size() > 1) return invalid_argument(std::string(name) + "() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.is_mapping()) {
      for (const auto& [key, value] : init.dict().entries()) QRT_TRY(target.dict().set(key, value));
    } else {
      QRT_ASSIGN_OR_RETURN(auto pairs, iterate_value(init));
      for (const Value& pair : pairs) {
        QRT_ASSIGN_OR_RETURN(auto kv, iterate_value(pair));
        if (kv.size() != 2) return invalid_argument(std::string(name) + "() sequence elements must have length 2");
        QRT_TRY(target.dict().set(kv[0], kv[1]));
      }
    }
  }
  for (auto& [key, value] : args.keyword) target.dict().set_str(key, std::move(value));
  return target;
}

Result<Value> global_namespace(CallArgs& args, Interpreter&) { return fill_mapping(Value::new_namespace(), args, "namespace"); }
Result<Value> global_dict(CallArgs& args, Interpreter&) { return fill_mapping(Value::new_dict(), args, "dict"); }

Result<Value> global_raise_exception(CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("raise_exception", args, {req("message")}));
  QRT_ASSIGN_OR_RETURN(std::string message, to_str(p[0]));
  return invalid_argument("template raised an exception: " + message);
}

Result<Value> global_strftime_now(CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("strftime_now", args, {req("format")}));
  QRT_ASSIGN_OR_RETURN(std::string format, string_arg("strftime_now", p[0]));
  if (format.empty()) return Value::string("");
  const std::time_t t = std::chrono::system_clock::to_time_t(interp.now());
  std::tm local{};
  localtime_r(&t, &local);
  std::vector<char> buf(256 + format.size() * 16);
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
  if (n == 0) return invalid_argument("strftime_now could not format '" + format + "'");
  return Value::string(std::string(buf.data(), n));
}

// One %-conversion: flags, width and precision applied the way Python's printf-style formatting does.
Result<std::string> format_one(char conversion, const std::string& flags, int width, int precision, const Value& v) {
  std::string body;
  const bool left = flags.find('-') != std::string::npos;
  bool numeric = false;
  switch (conversion) {
    case 's':
    case 'r':
    case 'a': {
      if (conversion == 's') {
        QRT_ASSIGN_OR_RETURN(body, to_str(v));
      } else {
        QRT_TRY(append_repr(body, v));
      }
      if (precision >= 0) {
        const auto offsets = text::codepoint_offsets(body);
        if (static_cast<size_t>(precision) + 1 < offsets.size()) body.resize(offsets[static_cast<size_t>(precision)]);
      }
      break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      if (!v.is_number()) {
        return invalid_argument(std::string("%") + conversion + " format: a real number is required, not " + type_name(v));
      }
      const int64_t i = v.is_integral() ? v.as_int() : static_cast<int64_t>(v.as_float());
      std::string spec = "%" + flags;
      if (precision >= 0) spec += "." + std::to_string(precision);
      spec += "ll";
      spec += (conversion == 'i' || conversion == 'u') ? 'd' : conversion;
      char buf[128];
      std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(i));
      body = buf;
      numeric = true;
      break;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) {
        return invalid_argument(std::string("must be real number, not ") + type_name(v));
      }
      std::string spec = "%" + flags;
      spec += "." + std::to_string(precision >= 0 ? std::min(precision, 100) : 6);
      spec += conversion;
      char buf[512];
      std::snprintf(buf, sizeof(buf), spec.c_str(), v.as_float());
      body = buf;
      numeric = true;
      break;
    }
    case 'c': {
      if (v.is_string() && text::codepoint_count(v.as_string()) == 1) {
        body = v.as_string();
      } else if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        text::append_utf8(body, static_cast<uint32_t>(v.as_int()));
      } else {
        return invalid_argument("%c requires an int or a unicode character");
      }
      break;
    }
    default: return invalid_argument(std::string("unsupported format character '") + conversion + "'");
  }
  const auto len = static_cast<int>(text::codepoint_count(body));
  if (width > len) {
    const auto pad = static_cast<size_t>(width - len);
    if (left) {
      body += std::string(pad, ' ');
    } else if (numeric && flags.find('0') != std::string::npos) {
      const size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
      body.insert(sign, pad, '0');
    } else {
      body.insert(0, pad, ' ');
    }
  }
  return body;
}

}  // namespace

Value method_attribute(const Value& object, const std::string& name) {
  if (!is_python_method(object, name)) return Value::undefined("no method '" + name + "'");
  return Value::callable(std::make_shared<BoundMethod>(object, name));
}

void add_global_functions(ValueDict& globals) {
  globals.set_str("range", Value::callable(std::make_shared<NativeFunction>("range", global_range)));
  globals.set_str("namespace", Value::callable(std::make_shared<NativeFunction>("namespace", global_namespace)));
  globals.set_str("dict", Value::callable(std::make_shared<NativeFunction>("dict", global_dict)));
  globals.set_str("raise_exception",
                  Value::callable(std::make_shared<NativeFunction>("raise_exception", global_raise_exception)));
  globals.set_str("strftime_now", Value::callable(std::make_shared<NativeFunction>("strftime_now", global_strftime_now)));
}

Result<std::string> percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  // Python treats a non-tuple argument as the single value to format, and anything subscriptable (a dict, a
  // list) as a possible mapping: unused arguments are then not an error.
  bool subscriptable = false;
  if (args.is_tuple()) {
    positional = args.list().items;
  } else {
    positional.push_back(args);
    if (args.is_mapping()) mapping = &args;
    subscriptable = args.is_mapping() || args.is_sequence_list() || args.is_undefined();
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) return invalid_argument("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const Value* named = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) return invalid_argument("incomplete format key");
      if (!mapping) return invalid_argument(subscriptable ? "list indices must be integers or slices, not str"
                                                          : "format requires a mapping");
      const Value* found = mapping->dict().find_str(format.substr(i + 1, close - i - 1));
      if (!found) return invalid_argument("KeyError: '" + format.substr(i + 1, close - i - 1) + "'");
      named = found;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) flags += format[i++];
    auto take_arg = [&]() -> Result<Value> {
      if (named) return *named;
      if (next >= positional.size()) return invalid_argument("not enough arguments for format string");
      return positional[next++];
    };
    auto read_number = [&](int* out_number) -> Status {
      if (i < format.size() && format[i] == '*') {
        ++i;
        QRT_ASSIGN_OR_RETURN(Value n, take_arg());
        if (!n.is_integral()) return invalid_argument("* wants int");
        *out_number = static_cast<int>(std::clamp<int64_t>(n.as_int(), -(1 << 20), 1 << 20));
        return ok_status();
      }
      int n = 0;
      bool any = false;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = std::min(n * 10 + (format[i++] - '0'), 1 << 20);
        any = true;
      }
      if (any) *out_number = n;
      return ok_status();
    };
    int width = 0;
    int precision = -1;
    QRT_TRY(read_number(&width));
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = 0;
      QRT_TRY(read_number(&precision));
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return invalid_argument("incomplete format");
    QRT_ASSIGN_OR_RETURN(Value v, take_arg());
    QRT_ASSIGN_OR_RETURN(std::string piece, format_one(format[i], flags, width, precision, v));
    out += piece;
  }
  if (!subscriptable && next < positional.size()) {
    return invalid_argument("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace qrt::chat
