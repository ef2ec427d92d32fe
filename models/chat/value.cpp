#include "models/chat/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "models/chat/text.hpp"

namespace qrt::chat {

Value Value::undefined(std::string why) {
  Value v;
  v.str_ = std::move(why);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.int_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.float_ = f;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.str_ = std::move(s);
  v.markup_ = markup;
  return v;
}

Value Value::list(std::vector<Value> items) {
  auto l = std::make_shared<ValueList>();
  l->items = std::move(items);
  return list_ref(std::move(l));
}

Value Value::tuple(std::vector<Value> items) {
  auto l = std::make_shared<ValueList>();
  l->items = std::move(items);
  l->is_tuple = true;
  return list_ref(std::move(l));
}

Value Value::lazy(std::vector<Value> items) {
  auto l = std::make_shared<ValueList>();
  l->items = std::move(items);
  l->is_lazy = true;
  return list_ref(std::move(l));
}

Value Value::dict_view(std::vector<Value> items, DictView view) {
  auto l = std::make_shared<ValueList>();
  l->items = std::move(items);
  l->view = view;
  return list_ref(std::move(l));
}

Value Value::list_ref(std::shared_ptr<ValueList> list) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.ptr_ = std::move(list);
  return v;
}

Value Value::dict(std::shared_ptr<ValueDict> dict) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.ptr_ = std::move(dict);
  return v;
}

Value Value::new_dict() { return dict(std::make_shared<ValueDict>()); }

Value Value::new_namespace() {
  auto d = std::make_shared<ValueDict>();
  d->is_namespace = true;
  return dict(std::move(d));
}

Value Value::callable(std::shared_ptr<Callable> fn) {
  Value v;
  v.kind_ = ValueKind::kCallable;
  v.ptr_ = std::move(fn);
  return v;
}

bool Value::is_tuple() const { return is_list() && list().is_tuple; }
bool Value::is_lazy() const { return is_list() && list().is_lazy; }
bool Value::is_view() const { return is_list() && list().view != DictView::kNone; }

namespace {
const char* view_name(Value::DictView view) {
  switch (view) {
    case Value::DictView::kKeys: return "dict_keys";
    case Value::DictView::kValues: return "dict_values";
    case Value::DictView::kItems: return "dict_items";
    default: return "list";
  }
}
}  // namespace
bool Value::is_namespace() const { return is_dict() && dict().is_namespace; }

void release_deep(std::vector<Value> pending) {
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    if (!v.ptr_ || v.ptr_.use_count() != 1) continue;
    if (v.kind_ == ValueKind::kList) {
      auto& items = v.list().items;
      for (auto& item : items) pending.push_back(std::move(item));
      items.clear();
    } else if (v.kind_ == ValueKind::kDict) {
      ValueDict& d = v.dict();
      for (auto& [key, item] : d.entries_) {
        pending.push_back(std::move(key));
        pending.push_back(std::move(item));
      }
      d.entries_.clear();
      d.index_.clear();
    } else if (v.kind_ == ValueKind::kCallable) {
      if (Value* bound = v.fn().bound_object()) pending.push_back(std::move(*bound));
    }
  }
}

ValueList::~ValueList() {
  if (!items.empty()) release_deep(std::move(items));
}

ValueDict::~ValueDict() {
  if (entries_.empty()) return;
  std::vector<Value> pending;
  pending.reserve(entries_.size() * 2);
  for (auto& [key, item] : entries_) {
    pending.push_back(std::move(key));
    pending.push_back(std::move(item));
  }
  release_deep(std::move(pending));
}

Result<std::string> hash_key(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kString: return "s" + key.as_string();
    case ValueKind::kBool:
    case ValueKind::kInt: return "n" + std::to_string(key.as_int());
    case ValueKind::kFloat: {
      const double f = key.as_float();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18) {
        return "n" + std::to_string(static_cast<int64_t>(f));
      }
      return "f" + format_float(f);
    }
    case ValueKind::kNone: return std::string("0");
    // Jinja2's Undefined hashes by its type and equals any other Undefined: one key for all of them.
    case ValueKind::kUndefined: return std::string("u");
    case ValueKind::kList:
      if (key.is_tuple()) {
        std::string out = "t(";
        for (const Value& item : key.list().items) {
          QRT_ASSIGN_OR_RETURN(std::string part, hash_key(item));
          out += std::to_string(part.size()) + ":" + part;
        }
        return out + ")";
      }
      break;
    default: break;
  }
  return invalid_argument("unhashable type: '" + type_name(key) + "'");
}

Result<const Value*> ValueDict::find(const Value& key) const {
  QRT_ASSIGN_OR_RETURN(std::string k, hash_key(key));
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* ValueDict::find_str(std::string_view key) const {
  std::string k;
  k.reserve(key.size() + 1);
  k += 's';
  k += key;
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

Status ValueDict::set(Value key, Value value) {
  QRT_ASSIGN_OR_RETURN(std::string k, hash_key(key));
  auto it = index_.find(k);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
  } else {
    index_.emplace(std::move(k), entries_.size());
    entries_.emplace_back(std::move(key), std::move(value));
  }
  return ok_status();
}

void ValueDict::set_str(std::string key, Value value) {
  Status s = set(Value::string(std::move(key)), std::move(value));
  (void)s;  // string keys are always hashable
}

Result<bool> ValueDict::erase(const Value& key) {
  QRT_ASSIGN_OR_RETURN(std::string k, hash_key(key));
  auto it = index_.find(k);
  if (it == index_.end()) return false;
  const size_t pos = it->second;
  index_.erase(it);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(pos));
  for (auto& [name, p] : index_) {
    if (p > pos) --p;
  }
  return true;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "NoneType";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return v.is_markup() ? "Markup" : "str";
    case ValueKind::kList:
      if (v.is_view()) return view_name(v.list().view);
      return v.is_lazy() ? "generator" : v.is_tuple() ? "tuple" : "list";
    case ValueKind::kDict: return v.is_namespace() ? "Namespace" : "dict";
    case ValueKind::kCallable: return v.fn().is_macro() ? "Macro" : "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return false;
    case ValueKind::kBool:
    case ValueKind::kInt: return v.as_int() != 0;
    case ValueKind::kFloat: return v.as_float() != 0.0;
    case ValueKind::kString: return !v.as_string().empty();
    case ValueKind::kList: return v.is_lazy() || !v.list().items.empty();
    case ValueKind::kDict: return v.is_namespace() || v.dict().size() != 0;
    case ValueKind::kCallable: return true;
  }
  return false;
}

namespace {

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  const Value& i = a.is_integral() ? a : b;
  const Value& f = a.is_integral() ? b : a;
  if (i.is_integral() && f.is_float()) {
    // Exact comparison, as Python does, for integers beyond double's 53-bit mantissa.
    const double d = f.as_float();
    if (!(d == std::floor(d)) || std::fabs(d) >= 9.2e18) return false;
    return static_cast<int64_t>(d) == i.as_int();
  }
  return a.as_float() == b.as_float();
}

bool equal_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return false;
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return true;
    case ValueKind::kString: return a.as_string() == b.as_string();
    case ValueKind::kList: {
      if (a.identity() == b.identity()) return true;
      if (a.is_lazy() || b.is_lazy() || a.is_tuple() != b.is_tuple() || a.list().view != b.list().view) return false;
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      if (a.identity() == b.identity()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      const ValueDict& x = a.dict();
      const ValueDict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        auto other = y.find(key);
        if (!other.ok() || *other == nullptr || !equal_at(value, **other, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

Result<bool> less_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return out_of_range("values nested too deeply to compare");
  if (a.is_undefined()) return invalid_argument(a.undefined_reason().empty() ? "undefined value" : a.undefined_reason());
  if (b.is_undefined()) return invalid_argument(b.undefined_reason().empty() ? "undefined value" : b.undefined_reason());
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order is code point order
  if (a.is_sequence_list() && b.is_sequence_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal_at(x[i], y[i], depth + 1)) continue;
      return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  return invalid_argument("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
                          "'");
}

void append_string_repr(std::string& out, const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = text::decode_at(s, i, &len);
    i += len;
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == static_cast<uint32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else {
      // Python escapes code points that are not printable: controls, format characters, separators other than
      // the space, private use. This covers the ones that occur in practice.
      const bool unprintable = cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
                               cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
                               (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || (cp >= 0xE000 && cp <= 0xF8FF) ||
                               cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB);
      if (!unprintable) {
        text::append_utf8(out, cp);
      } else {
        char buf[16];
        if (cp < 0x100) {
          std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
        } else if (cp < 0x10000) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
        } else {
          std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
        }
        out += buf;
      }
    }
  }
  out += quote;
}

Status append_at(std::string& out, const Value& v, bool repr, int depth) {
  if (depth > kMaxValueDepth) return out_of_range("value nested too deeply to print");
  switch (v.kind()) {
    case ValueKind::kUndefined:
      if (repr) out += "Undefined";
      return ok_status();
    case ValueKind::kNone: out += "None"; return ok_status();
    case ValueKind::kBool: out += v.as_bool() ? "True" : "False"; return ok_status();
    case ValueKind::kInt: out += std::to_string(v.as_int()); return ok_status();
    case ValueKind::kFloat: out += format_float(v.as_float()); return ok_status();
    case ValueKind::kString:
      if (!repr) {
        out += v.as_string();
      } else {
        if (v.is_markup()) out += "Markup(";
        append_string_repr(out, v.as_string());
        if (v.is_markup()) out += ")";
      }
      return ok_status();
    case ValueKind::kList: {
      if (v.is_lazy()) {
        out += "<generator object>";
        return ok_status();
      }
      const auto& items = v.list().items;
      if (v.is_view()) out += std::string(view_name(v.list().view)) + "(";
      out += v.is_tuple() ? '(' : '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        QRT_TRY(append_at(out, items[i], true, depth + 1));
      }
      if (v.is_tuple() && items.size() == 1) out += ',';
      out += v.is_tuple() ? ')' : ']';
      if (v.is_view()) out += ')';
      return ok_status();
    }
    case ValueKind::kDict: {
      if (v.is_namespace()) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.dict().entries()) {
        if (!first) out += ", ";
        first = false;
        QRT_TRY(append_at(out, key, true, depth + 1));
        out += ": ";
        QRT_TRY(append_at(out, item, true, depth + 1));
      }
      out += '}';
      if (v.is_namespace()) out += '>';
      return ok_status();
    }
    case ValueKind::kCallable: out += v.fn().repr(); return ok_status();
  }
  return ok_status();
}

}  // namespace

bool equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }
Result<bool> less(const Value& a, const Value& b) { return less_at(a, b, 0); }

Status append_str(std::string& out, const Value& v) { return append_at(out, v, false, 0); }
Status append_repr(std::string& out, const Value& v) { return append_at(out, v, true, 0); }

Result<std::string> to_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  QRT_TRY(append_str(out, v));
  return out;
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int ndigits = static_cast<int>(digits.size());
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= ndigits) {
      out += digits + std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (ndigits > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  return out + ebuf;
}

bool would_cycle(const Value& container, const Value& item, size_t* visited) {
  *visited = 0;
  const void* target = container.identity();
  if (target == nullptr || item.identity() == nullptr) return false;
  std::vector<const Value*> stack{&item};
  std::unordered_set<const void*> seen;
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    ++*visited;
    const void* id = v->identity();
    if (id == nullptr) continue;
    if (id == target) return true;
    if (!seen.insert(id).second) continue;
    if (v->is_list()) {
      for (const Value& x : v->list().items) stack.push_back(&x);
    } else if (v->is_dict()) {
      for (const auto& [k, x] : v->dict().entries()) stack.push_back(&x);
    } else if (v->is_callable()) {
      if (Value* bound = v->fn().bound_object()) stack.push_back(bound);
    }
  }
  return false;
}

}  // namespace qrt::chat
