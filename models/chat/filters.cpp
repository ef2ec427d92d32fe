// Jinja2's built-in filters and tests (jinja2/filters.py, jinja2/tests.py), with transformers' tojson.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "models/chat/builtins.hpp"
#include "models/chat/interpreter.hpp"
#include "models/chat/json.hpp"
#include "models/chat/operators.hpp"
#include "models/chat/text.hpp"

namespace qrt::chat {

namespace {

using FilterFn = std::function<Result<Value>(const Value&, CallArgs&, Interpreter&)>;
using TestFn = std::function<Result<bool>(const Value&, CallArgs&, Interpreter&)>;

Param opt(const char* name, Value v) { return Param{name, true, std::move(v)}; }
Param req(const char* name) { return Param{name, false, Value()}; }

// Jinja's soft_str: strings (Markup included) stay as they are, everything else goes through str().
Result<Value> soft_str(const Value& v) {
  if (v.is_string()) return v;
  QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
  return Value::string(std::move(s));
}

template <class F>
Result<Value> map_string(const Value& v, F f) {
  QRT_ASSIGN_OR_RETURN(Value s, soft_str(v));
  return Value::string(f(s.as_string()), s.is_markup());
}

// Jinja's title filter (not str.title): chunks split at runs of whitespace, '-', '(', '{', '[' and '<' get their
// first character upper-cased and the rest lower-cased ("they're" -> "They're").
std::string jinja_title(std::string_view s) {
  auto is_split = [](uint32_t cp) {
    return text::is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
  };
  std::string out;
  bool chunk_start = true;
  bool previous_split = false;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = text::decode_at(s, i, &len);
    const std::string_view one = s.substr(i, len);
    i += len;
    const bool split = is_split(cp);
    if (split != previous_split) chunk_start = true;
    previous_split = split;
    out += chunk_start ? text::upper(one) : text::lower(one);
    chunk_start = false;
  }
  return out;
}

Result<Value> lower_if_string(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(text::lower(v.as_string()));
  return v;
}

// Jinja's make_attrgetter: "a.b.0" looks up each part with item access (digits as integers).
Result<Value> get_path(Interpreter& interp, const Value& item, const Value& attribute) {
  if (attribute.is_none() || attribute.is_undefined()) return item;
  if (attribute.is_integral()) return interp.get_item(item, attribute);
  QRT_ASSIGN_OR_RETURN(std::string path, to_str(attribute));
  Value current = item;
  for (const std::string& part : text::split_sep(path, ".", -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18) {
      QRT_ASSIGN_OR_RETURN(current, interp.get_item(current, Value::integer(std::stoll(part))));
    } else {
      QRT_ASSIGN_OR_RETURN(current, interp.get_item(current, Value::string(part)));
    }
  }
  return current;
}

Result<std::vector<Value>> items_of(const Value& v) { return iterate_value(v); }

Status sort_values(std::vector<Value>& items, const std::function<Result<Value>(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    QRT_ASSIGN_OR_RETURN(Value k, key(items[i]));
    keyed.emplace_back(std::move(k), i);
  }
  Status failure;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto r = reverse ? less(b.first, a.first) : less(a.first, b.first);
    if (!r.ok()) {
      if (failure.ok()) failure = r.status();
      return false;
    }
    return *r;
  });
  QRT_TRY(failure);
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (const auto& [k, i] : keyed) sorted.push_back(items[i]);
  items = std::move(sorted);
  return ok_status();
}

Result<Value> filter_tojson(const Value& v, CallArgs& args, Interpreter& interp) {
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) = json.dumps(...)
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("tojson", args,
                                              {opt("ensure_ascii", Value::boolean(false)), opt("indent", Value::none()),
                                               opt("separators", Value::none()), opt("sort_keys", Value::boolean(false))}));
  JsonDumpOptions options;
  options.ensure_ascii = truthy(p[0]);
  if (p[1].is_integral()) {
    options.has_indent = true;
    options.indent.assign(static_cast<size_t>(std::clamp<int64_t>(p[1].as_int(), 0, 1024)), ' ');
  } else if (p[1].is_string()) {
    options.has_indent = true;
    options.indent = p[1].as_string();
  } else if (!p[1].is_none()) {
    return invalid_argument("tojson indent must be an integer, a string or none");
  }
  if (!p[2].is_none()) {
    if (!p[2].is_list() || p[2].list().items.size() != 2 || !p[2].list().items[0].is_string() ||
        !p[2].list().items[1].is_string()) {
      return invalid_argument("tojson separators must be a pair of strings");
    }
    options.has_separators = true;
    options.item_separator = p[2].list().items[0].as_string();
    options.key_separator = p[2].list().items[1].as_string();
  }
  options.sort_keys = truthy(p[3]);
  QRT_ASSIGN_OR_RETURN(std::string json, json_dumps(v, options));
  QRT_TRY(interp.charge(json.size()));
  if (json.size() > interp.limits().max_output_bytes) return out_of_range("tojson output too large");
  return Value::string(std::move(json));
}

Result<Value> filter_indent(const Value& v, CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("indent", args,
                                              {opt("width", Value::integer(4)), opt("first", Value::boolean(false)),
                                               opt("blank", Value::boolean(false))}));
  std::string indentation;
  if (p[0].is_string()) {
    indentation = p[0].as_string();
  } else if (p[0].is_integral()) {
    indentation.assign(static_cast<size_t>(std::clamp<int64_t>(p[0].as_int(), 0, 1024)), ' ');
  } else {
    return invalid_argument("indent width must be an integer or a string");
  }
  // Jinja's indent starts with `s += "\n"`, which fails for anything but a string.
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_string()) {
    if (v.is_sequence_list() && !v.is_tuple()) return invalid_argument("'list' object has no attribute 'splitlines'");
    return invalid_argument("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  }
  const Value& s = v;
  // Jinja appends a newline first so that splitlines keeps a trailing empty line.
  auto lines = text::splitlines(s.as_string() + "\n", false);
  std::string out;
  if (truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indentation;
      out += lines[i];
    }
  } else {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + (lines[i].empty() ? std::string() : indentation);
      out += lines[i];
    }
  }
  if (truthy(p[1])) out = indentation + out;
  QRT_TRY(interp.charge(out.size()));
  if (out.size() > interp.limits().max_output_bytes) return out_of_range("indent output too large");
  return Value::string(std::move(out), s.is_markup());
}

Result<Value> filter_join(const Value& v, CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("join", args, {opt("d", Value::string("")), opt("attribute", Value::none())}));
  QRT_ASSIGN_OR_RETURN(std::string sep, to_str(p[0]));
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    QRT_ASSIGN_OR_RETURN(Value item, get_path(interp, items[i], p[1]));
    QRT_TRY(append_str(out, item));
    if (out.size() > interp.limits().max_output_bytes) return out_of_range("join output too large");
  }
  QRT_TRY(interp.charge(out.size()));
  return Value::string(std::move(out));
}

// select / reject / selectattr / rejectattr
Result<Value> select_or_reject(const Value& v, CallArgs& args, Interpreter& interp, bool select, bool by_attribute) {
  size_t next = 0;
  Value attribute = Value::none();
  if (by_attribute) {
    if (args.positional.empty()) return invalid_argument("missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  std::string test_name;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return invalid_argument("test name must be a string");
    test_name = args.positional[next++].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.keyword = args.keyword;
  }
  if (!truthy(v)) return Value::lazy({});  // Jinja yields nothing for a falsy input (None included)
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> kept;
  for (const Value& item : items) {
    QRT_ASSIGN_OR_RETURN(Value subject, get_path(interp, item, attribute));
    bool pass = false;
    if (test_name.empty()) {
      pass = truthy(subject);
    } else {
      CallArgs call = test_args;
      QRT_ASSIGN_OR_RETURN(pass, apply_test(test_name, subject, call, interp));
    }
    if (pass == select) kept.push_back(item);
  }
  return Value::lazy(std::move(kept));
}

Result<Value> filter_map(const Value& v, CallArgs& args, Interpreter& interp) {
  if (!truthy(v)) return Value::lazy({});  // Jinja yields nothing for a falsy input (None included)
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> out;
  if (args.positional.empty()) {
    Value attribute;
    Value fallback = Value::none();
    for (auto& [name, value] : args.keyword) {
      if (name == "attribute") {
        attribute = value;
      } else if (name == "default") {
        fallback = value;
      } else {
        return invalid_argument("unexpected keyword argument '" + name + "'");
      }
    }
    if (attribute.is_undefined()) return invalid_argument("map requires a filter name or attribute=");
    for (const Value& item : items) {
      QRT_ASSIGN_OR_RETURN(Value got, get_path(interp, item, attribute));
      out.push_back(got.is_undefined() && !fallback.is_none() ? fallback : got);
    }
    return Value::lazy(std::move(out));
  }
  if (!args.positional[0].is_string()) return invalid_argument("map filter name must be a string");
  const std::string name = args.positional[0].as_string();
  QRT_TRY(interp.enter_call());
  for (const Value& item : items) {
    CallArgs call;
    call.positional.assign(args.positional.begin() + 1, args.positional.end());
    call.keyword = args.keyword;
    auto r = apply_filter(name, item, call, interp);
    if (!r.ok()) {
      interp.leave_call();
      return r.status();
    }
    out.push_back(std::move(r).value());
  }
  interp.leave_call();
  return Value::lazy(std::move(out));
}

Result<Value> filter_unique(const Value& v, CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("unique", args,
                                              {opt("case_sensitive", Value::boolean(false)), opt("attribute", Value::none())}));
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::unordered_set<std::string> seen;
  std::vector<Value> out;
  for (const Value& item : items) {
    QRT_ASSIGN_OR_RETURN(Value key, get_path(interp, item, p[1]));
    QRT_ASSIGN_OR_RETURN(key, lower_if_string(key, truthy(p[0])));
    QRT_ASSIGN_OR_RETURN(std::string h, hash_key(key));
    if (seen.insert(h).second) out.push_back(item);
  }
  return Value::lazy(std::move(out));
}

Result<Value> filter_dictsort(const Value& v, CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("dictsort", args,
                                              {opt("case_sensitive", Value::boolean(false)), opt("by", Value::string("key")),
                                               opt("reverse", Value::boolean(false))}));
  if (!v.is_mapping()) return invalid_argument("dictsort expects a mapping, got '" + type_name(v) + "'");
  if (!p[1].is_string() || (p[1].as_string() != "key" && p[1].as_string() != "value")) {
    return invalid_argument("You can only sort by either \"key\" or \"value\"");
  }
  const size_t pos = p[1].as_string() == "key" ? 0 : 1;
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.dict().entries()) pairs.push_back(Value::tuple({key, value}));
  const bool case_sensitive = truthy(p[0]);
  QRT_TRY(sort_values(pairs, [&](const Value& pair) { return lower_if_string(pair.list().items[pos], case_sensitive); },
                      truthy(p[2])));
  return Value::list(std::move(pairs));
}

Result<Value> filter_sort(const Value& v, CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("sort", args,
                                              {opt("reverse", Value::boolean(false)), opt("case_sensitive", Value::boolean(false)),
                                               opt("attribute", Value::none())}));
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> attributes;
  if (p[2].is_string()) {
    for (auto& a : text::split_sep(p[2].as_string(), ",", -1)) attributes.push_back(Value::string(a));
  } else if (!p[2].is_none()) {
    attributes.push_back(p[2]);
  }
  const bool case_sensitive = truthy(p[1]);
  // Jinja's keys are always lists (one entry per attribute, or the item itself), and lists compare element by
  // element after an equality test, so keys that are equal never meet '<': undefined attributes (all equal) sort
  // as they stand instead of failing.
  QRT_TRY(sort_values(
      items,
      [&](const Value& item) -> Result<Value> {
        std::vector<Value> parts;
        if (attributes.empty()) {
          QRT_ASSIGN_OR_RETURN(Value key, lower_if_string(item, case_sensitive));
          parts.push_back(std::move(key));
        }
        for (const Value& a : attributes) {
          QRT_ASSIGN_OR_RETURN(Value got, get_path(interp, item, a));
          QRT_ASSIGN_OR_RETURN(got, lower_if_string(got, case_sensitive));
          parts.push_back(std::move(got));
        }
        return Value::list(std::move(parts));
      },
      truthy(p[0])));
  return Value::list(std::move(items));
}

Result<Value> filter_min_max(const Value& v, CallArgs& args, Interpreter& interp, bool want_max) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(want_max ? "max" : "min", args,
                                              {opt("case_sensitive", Value::boolean(false)), opt("attribute", Value::none())}));
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    QRT_ASSIGN_OR_RETURN(Value key, get_path(interp, items[i], p[1]));
    QRT_ASSIGN_OR_RETURN(key, lower_if_string(key, truthy(p[0])));
    if (i == 0) {
      best_key = key;
      continue;
    }
    QRT_ASSIGN_OR_RETURN(bool better, want_max ? less(best_key, key) : less(key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

// Python's int(str, base) for the int filter: optional sign, underscores between digits, base prefixes.
bool parse_python_int(std::string_view s, int64_t base, int64_t* out) {
  s = text::strip_space(s, text::StripSide::kBoth);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 1 && s[0] == '0') {
    const char k = static_cast<char>(s[1] | 0x20);
    const int64_t prefix_base = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
    if (prefix_base != 0 && (base == prefix_base || base == 0)) {
      base = prefix_base;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (s.empty() || base < 2 || base > 36) return false;
  int64_t v = 0;
  bool last_underscore = true;
  for (char c : s) {
    if (c == '_') {
      if (last_underscore) return false;
      last_underscore = true;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
    last_underscore = false;
  }
  if (last_underscore) return false;
  *out = negative ? -v : v;
  return true;
}

bool parse_python_float(std::string_view s, double* out) {
  std::string t(text::strip_space(s, text::StripSide::kBoth));
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  const std::string l = text::lower(t);
  const std::string body = (!l.empty() && (l[0] == '+' || l[0] == '-')) ? l.substr(1) : l;
  const double sign = (!l.empty() && l[0] == '-') ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") {
    *out = sign * INFINITY;
    return true;
  }
  if (body == "nan") {
    *out = NAN;
    return true;
  }
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

Result<Value> filter_int(const Value& v, CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("int", args, {opt("default", Value::integer(0)), opt("base", Value::integer(10))}));
  if (v.is_undefined()) return undefined_error(v);  // Undefined refuses int()
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float() && std::isfinite(v.as_float()) && std::fabs(v.as_float()) < 9.2e18) {
    return Value::integer(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    int64_t i = 0;
    if (parse_python_int(v.as_string(), p[1].is_integral() ? p[1].as_int() : 10, &i)) return Value::integer(i);
    double f = 0;
    if (parse_python_float(v.as_string(), &f) && std::isfinite(f) && std::fabs(f) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(f));
    }
  }
  return p[0];
}

Result<Value> filter_float(const Value& v, CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("float", args, {opt("default", Value::number(0.0))}));
  if (v.is_undefined()) return undefined_error(v);  // Undefined refuses float()
  if (v.is_number()) return Value::number(v.as_float());
  double f = 0;
  if (v.is_string() && parse_python_float(v.as_string(), &f)) return Value::number(f);
  return p[0];
}

Result<Value> filter_round(const Value& v, CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("round", args,
                                              {opt("precision", Value::integer(0)), opt("method", Value::string("common"))}));
  if (!v.is_number()) return invalid_argument("round expects a number, got '" + type_name(v) + "'");
  const int64_t precision = p[0].is_integral() ? p[0].as_int() : 0;
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const std::string method = p[1].is_string() ? p[1].as_string() : "";
  if (method == "common" && v.is_integral()) {
    // Python's round(int, n) is an int.
    if (precision >= 0) return Value::integer(v.as_int());
    const double r = std::nearbyint(static_cast<double>(v.as_int()) * scale) / scale;
    return Value::integer(static_cast<int64_t>(r));
  }
  double x = v.as_float() * scale;
  if (method == "common") {
    x = std::nearbyint(x);  // Python's round(): halves go to the even neighbour
  } else if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    return invalid_argument("method must be common, ceil or floor");
  }
  return Value::number(x / scale);
}

Result<Value> filter_sum(const Value& v, CallArgs& args, Interpreter& interp) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("sum", args, {opt("attribute", Value::none()), opt("start", Value::integer(0))}));
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  Value total = p[1];
  for (const Value& item : items) {
    QRT_ASSIGN_OR_RETURN(Value x, get_path(interp, item, p[0]));
    QRT_ASSIGN_OR_RETURN(total, binary_op(ast::BinaryOp::kAdd, total, x, interp));
  }
  return total;
}

Result<Value> filter_items(const Value& v, CallArgs& args, Interpreter&) {
  QRT_TRY(bind_arguments("items", args, {}).status());
  if (v.is_undefined()) return Value::lazy({});
  if (!v.is_mapping()) return invalid_argument("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.dict().entries()) pairs.push_back(Value::tuple({key, value}));
  return Value::lazy(std::move(pairs));
}

Result<Value> filter_reverse(const Value& v, CallArgs&, Interpreter&) {
  if (v.is_string()) {
    auto chars = text::codepoints(v.as_string());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::string(std::move(out), v.is_markup());
  }
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::reverse(items.begin(), items.end());
  // reversed() of a list or dict is an iterator; a generator is first turned into a list.
  return v.is_lazy() ? Value::list(std::move(items)) : Value::lazy(std::move(items));
}

Result<Value> filter_first_last(const Value& v, bool first) {
  if (!first && v.is_lazy()) return invalid_argument("'generator' object is not reversible");
  if (!first && v.is_undefined()) return v;
  QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
  if (items.empty()) return Value::undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  if (!first && v.is_string() && v.is_markup()) {
    // last goes through reversed(), which indexes the Markup (Markup items); first iterates it (plain str).
    return Value::string(items.back().as_string(), true);
  }
  return first ? items.front() : items.back();
}

Result<Value> filter_center(const Value& v, CallArgs& args, Interpreter&) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("center", args, {opt("width", Value::integer(80))}));
  QRT_ASSIGN_OR_RETURN(Value s, soft_str(v));
  const auto len = static_cast<int64_t>(text::codepoint_count(s.as_string()));
  const int64_t width = p[0].is_integral() ? std::min<int64_t>(p[0].as_int(), 1 << 20) : 80;
  if (width <= len) return s;
  const int64_t margin = width - len;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s.as_string() +
                           std::string(static_cast<size_t>(margin - left), ' '),
                       s.is_markup());  // Markup.center returns Markup
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const auto* table = new std::unordered_map<std::string, FilterFn>{
      {"abs", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         if (v.is_integral()) return v.as_int() < 0 ? unary_op(v, true) : Value::integer(v.as_int());
         if (v.is_float()) return Value::number(std::fabs(v.as_float()));
         return invalid_argument("bad operand type for abs(): '" + type_name(v) + "'");
       }},
      {"attr", [](const Value& v, CallArgs& a, Interpreter& i) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("attr", a, {req("name")}));
         QRT_ASSIGN_OR_RETURN(std::string name, to_str(p[0]));
         return i.get_attr(v, name);
       }},
      {"capitalize", [](const Value& v, CallArgs&, Interpreter&) { return map_string(v, text::capitalize); }},
      {"center", filter_center},
      {"count", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(int64_t n, length_of(v));
         return Value::integer(n);
       }},
      {"default", [](const Value& v, CallArgs& a, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("default", a,
                                                     {opt("default_value", Value::string("")), opt("boolean", Value::boolean(false))}));
         if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
         return v;
       }},
      {"dictsort", filter_dictsort},
      {"escape", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         if (v.is_string() && v.is_markup()) return v;
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         return Value::string(text::html_escape(s), true);
       }},
      {"first", [](const Value& v, CallArgs&, Interpreter&) { return filter_first_last(v, true); }},
      {"float", filter_float},
      {"forceescape", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         return Value::string(text::html_escape(s), true);
       }},
      {"format", [](const Value& v, CallArgs& a, Interpreter& i) -> Result<Value> {
         if (!a.keyword.empty()) return unsupported("format with keyword arguments is not supported");
         QRT_ASSIGN_OR_RETURN(Value s, soft_str(v));
         QRT_ASSIGN_OR_RETURN(std::string out, percent_format(s.as_string(), Value::tuple(a.positional)));
         QRT_TRY(i.charge(out.size()));
         return Value::string(std::move(out));
       }},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", [](const Value& v, CallArgs&, Interpreter&) { return filter_first_last(v, false); }},
      {"length", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(int64_t n, length_of(v));
         return Value::integer(n);
       }},
      {"list", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(auto items, items_of(v));
         return Value::list(std::move(items));
       }},
      {"lower", [](const Value& v, CallArgs&, Interpreter&) { return map_string(v, text::lower); }},
      {"map", filter_map},
      {"max", [](const Value& v, CallArgs& a, Interpreter& i) { return filter_min_max(v, a, i, true); }},
      {"min", [](const Value& v, CallArgs& a, Interpreter& i) { return filter_min_max(v, a, i, false); }},
      {"reject", [](const Value& v, CallArgs& a, Interpreter& i) { return select_or_reject(v, a, i, false, false); }},
      {"rejectattr", [](const Value& v, CallArgs& a, Interpreter& i) { return select_or_reject(v, a, i, false, true); }},
      {"replace", [](const Value& v, CallArgs& a, Interpreter& i) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("replace", a, {req("old"), req("new"), opt("count", Value::none())}));
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         QRT_ASSIGN_OR_RETURN(std::string old_text, to_str(p[0]));
         QRT_ASSIGN_OR_RETURN(std::string new_text, to_str(p[1]));
         const int64_t count = p[2].is_integral() ? p[2].as_int() : -1;
         if (text::replaced_size(s, old_text, new_text, count) > i.limits().max_output_bytes) {
           return out_of_range("replace output too large");
         }
         std::string out = text::replace(s, old_text, new_text, count);
         QRT_TRY(i.charge(out.size()));
         return Value::string(std::move(out));
       }},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         return Value::string(std::move(s), true);
       }},
      {"select", [](const Value& v, CallArgs& a, Interpreter& i) { return select_or_reject(v, a, i, true, false); }},
      {"selectattr", [](const Value& v, CallArgs& a, Interpreter& i) { return select_or_reject(v, a, i, true, true); }},
      {"sort", filter_sort},
      {"string", [](const Value& v, CallArgs&, Interpreter&) { return soft_str(v); }},
      {"sum", filter_sum},
      {"title", [](const Value& v, CallArgs&, Interpreter&) { return map_string(v, jinja_title); }},
      {"tojson", filter_tojson},
      {"trim", [](const Value& v, CallArgs& a, Interpreter&) -> Result<Value> {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("trim", a, {opt("chars", Value::none())}));
         QRT_ASSIGN_OR_RETURN(Value s, soft_str(v));
         if (p[0].is_none()) {
           return Value::string(std::string(text::strip_space(s.as_string(), text::StripSide::kBoth)), s.is_markup());
         }
         QRT_ASSIGN_OR_RETURN(std::string chars, to_str(p[0]));
         return Value::string(std::string(text::strip_chars(s.as_string(), chars, text::StripSide::kBoth)), s.is_markup());
       }},
      {"unique", filter_unique},
      {"upper", [](const Value& v, CallArgs&, Interpreter&) { return map_string(v, text::upper); }},
      {"wordcount", [](const Value& v, CallArgs&, Interpreter&) -> Result<Value> {
         // len(re.findall(r"\w+", s)); non-ASCII code points other than whitespace count as word characters.
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         int64_t words = 0;
         bool in_word = false;
         for (size_t i = 0; i < s.size();) {
           size_t len = 0;
           const uint32_t cp = text::decode_at(s, i, &len);
           i += len;
           const bool word = (cp < 0x80) ? (std::isalnum(static_cast<int>(cp)) || cp == '_') : !text::is_python_space(cp);
           if (word && !in_word) ++words;
           in_word = word;
         }
         return Value::integer(words);
       }},
  };
  return *table;
}

const std::unordered_map<std::string, std::string>& filter_aliases() {
  static const auto* table = new std::unordered_map<std::string, std::string>{{"d", "default"}, {"e", "escape"}};
  return *table;
}

// In Jinja2 but not here.
bool is_other_jinja_filter(std::string_view name) {
  static const char* kNames[] = {"batch", "filesizeformat", "groupby", "pprint", "random", "slice", "striptags",
                                 "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Result<bool> compare_test(const std::string& name, const Value& v, CallArgs& args) {
  QRT_ASSIGN_OR_RETURN(auto p, bind_arguments(name, args, {req("other")}));
  const Value& other = p[0];
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other);
  if (name == "ne" || name == "!=") return !equal(v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other, v);
  QRT_ASSIGN_OR_RETURN(bool strictly, name == "le" || name == "<=" ? less(v, other) : less(other, v));
  return strictly || equal(v, other);
}

// str.islower() / str.isupper(): at least one cased letter, and all cased letters in that case.
bool has_cased(const std::string& s, bool want_upper) {
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = text::decode_at(s, i, &len);
    i += len;
    if (!text::is_cased(cp)) continue;
    const bool is_upper = text::lower_codepoint(cp) != cp;
    const bool is_lower = text::upper_codepoint(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149;
    if (want_upper ? is_lower : is_upper) return false;
    any = true;
  }
  return any;
}

Result<int64_t> parity_operand(const Value& v) {
  if (v.is_integral()) return v.as_int();
  if (v.is_float() && v.as_float() == std::floor(v.as_float()) && std::fabs(v.as_float()) < 9.2e18) {
    return static_cast<int64_t>(v.as_float());
  }
  if (v.is_float()) return int64_t{1} << 62 | 1;  // a non-integral float is neither odd nor even
  if (v.is_undefined()) return undefined_error(v);
  return invalid_argument("unsupported operand type(s) for %: '" + type_name(v) + "' and 'int'");
}

const std::unordered_map<std::string, TestFn>& tests() {
  using R = Result<bool>;
  static const auto* table = new std::unordered_map<std::string, TestFn>{
      {"defined", [](const Value& v, CallArgs&, Interpreter&) -> R { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_none(); }},
      {"boolean", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_bool(); }},
      {"false", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_bool() && !v.as_bool(); }},
      {"true", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_bool() && v.as_bool(); }},
      {"integer", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_int(); }},
      {"float", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_float(); }},
      {"number", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_number(); }},
      {"string", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_mapping(); }},
      // Jinja's Undefined has a length, supports [] and iterates (as empty); a generator only iterates.
      {"sequence", [](const Value& v, CallArgs&, Interpreter&) -> R {
         return v.is_undefined() || v.is_string() || v.is_mapping() || v.is_sequence_list();
       }},
      {"iterable", [](const Value& v, CallArgs&, Interpreter&) -> R {
         return v.is_undefined() || v.is_string() || v.is_mapping() || v.is_list();
       }},
      {"callable", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_callable() || v.is_undefined(); }},
      {"escaped", [](const Value& v, CallArgs&, Interpreter&) -> R { return v.is_string() && v.is_markup(); }},
      {"lower", [](const Value& v, CallArgs&, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         return has_cased(s, false);
       }},
      {"upper", [](const Value& v, CallArgs&, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(std::string s, to_str(v));
         return has_cased(s, true);
       }},
      {"odd", [](const Value& v, CallArgs&, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(int64_t i, parity_operand(v));
         return v.is_float() && v.as_float() != std::floor(v.as_float()) ? false : (i % 2 != 0);
       }},
      {"even", [](const Value& v, CallArgs&, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(int64_t i, parity_operand(v));
         return v.is_float() && v.as_float() != std::floor(v.as_float()) ? false : (i % 2 == 0);
       }},
      {"divisibleby", [](const Value& v, CallArgs& a, Interpreter& i) -> R {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("divisibleby", a, {req("num")}));
         QRT_ASSIGN_OR_RETURN(Value r, binary_op(ast::BinaryOp::kMod, v, p[0], i));
         return equal(r, Value::integer(0));
       }},
      {"sameas", [](const Value& v, CallArgs& a, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("sameas", a, {req("other")}));
         if (v.identity() != nullptr || p[0].identity() != nullptr) return v.identity() == p[0].identity();
         return v.kind() == p[0].kind() && equal(v, p[0]);
       }},
      {"in", [](const Value& v, CallArgs& a, Interpreter&) -> R {
         QRT_ASSIGN_OR_RETURN(auto p, bind_arguments("in", a, {req("seq")}));
         return contains(p[0], v);
       }},
      {"filter", [](const Value& v, CallArgs&, Interpreter&) -> R {
         return v.is_string() && filter_support(v.as_string()) == BuiltinSupport::kImplemented;
       }},
      {"test", [](const Value& v, CallArgs&, Interpreter&) -> R {
         return v.is_string() && test_support(v.as_string()) == BuiltinSupport::kImplemented;
       }},
  };
  return *table;
}

bool is_compare_test(std::string_view name) {
  static const char* kNames[] = {"eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=",
                                 "gt", "greaterthan", ">", "ge", ">="};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

}  // namespace

BuiltinSupport filter_support(std::string_view name) {
  const std::string n(name);
  if (filters().count(n) || filter_aliases().count(n)) return BuiltinSupport::kImplemented;
  return is_other_jinja_filter(name) ? BuiltinSupport::kNotImplemented : BuiltinSupport::kUnknown;
}

BuiltinSupport test_support(std::string_view name) {
  if (tests().count(std::string(name)) || is_compare_test(name)) return BuiltinSupport::kImplemented;
  return BuiltinSupport::kUnknown;
}

Result<Value> apply_filter(const std::string& name, const Value& input, CallArgs& args, Interpreter& interp) {
  auto alias = filter_aliases().find(name);
  const std::string& resolved = alias == filter_aliases().end() ? name : alias->second;
  auto it = filters().find(resolved);
  if (it == filters().end()) {
    if (is_other_jinja_filter(name)) return unsupported("the '" + name + "' filter is not supported");
    return invalid_argument("no filter named '" + name + "'");
  }
  return it->second(input, args, interp);
}

Result<bool> apply_test(const std::string& name, const Value& input, CallArgs& args, Interpreter& interp) {
  if (is_compare_test(name)) return compare_test(name, input, args);
  auto it = tests().find(name);
  if (it == tests().end()) return invalid_argument("no test named '" + name + "'");
  return it->second(input, args, interp);
}

}  // namespace qrt::chat
