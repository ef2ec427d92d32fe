#include "models/chat/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "models/chat/text.hpp"

namespace qrt::chat {

namespace {

Result<Value> from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) return out_of_range("JSON value nested deeper than " + std::to_string(kMaxValueDepth));
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null:
    case Type::discarded: return Value::none();
    case Type::boolean: return Value::boolean(json.get<bool>());
    case Type::number_integer: return Value::integer(json.get<int64_t>());
    case Type::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return out_of_range("JSON integer " + std::to_string(u) + " does not fit in 64-bit signed integers");
      }
      return Value::integer(static_cast<int64_t>(u));
    }
    case Type::number_float: return Value::number(json.get<double>());
    case Type::string: {
      const auto& s = json.get_ref<const std::string&>();
      if (!text::is_valid_utf8(s)) return invalid_argument("JSON string is not valid UTF-8");
      return Value::string(s);
    }
    case Type::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        QRT_ASSIGN_OR_RETURN(Value v, from_json_at(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case Type::object: {
      Value d = Value::new_dict();
      for (const auto& [key, item] : json.items()) {
        if (!text::is_valid_utf8(key)) return invalid_argument("JSON object key is not valid UTF-8");
        QRT_ASSIGN_OR_RETURN(Value v, from_json_at(item, depth + 1));
        d.dict().set_str(key, std::move(v));
      }
      return d;
    }
    case Type::binary: return unsupported("binary JSON values have no template equivalent");
  }
  return internal_error("unknown JSON value type");
}

void append_hex4(std::string& out, uint32_t unit) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\u%04x", unit);
  out += buf;
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
            append_hex4(out, c);
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    size_t len = 0;
    const uint32_t cp = text::decode_at(s, i, &len);
    if (!ensure_ascii) {
      out.append(s, i, len);
    } else if (cp < 0x10000) {
      append_hex4(out, cp);
    } else {
      const uint32_t v = cp - 0x10000;
      append_hex4(out, 0xD800 + (v >> 10));
      append_hex4(out, 0xDC00 + (v & 0x3FF));
    }
    i += len;
  }
  out += '"';
}

void append_json_float(std::string& out, double f) {
  if (std::isnan(f)) {
    out += "NaN";
  } else if (std::isinf(f)) {
    out += f < 0 ? "-Infinity" : "Infinity";
  } else {
    out += format_float(f);
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    item_separator_ = options.has_separators ? options.item_separator : (options.has_indent ? "," : ", ");
    key_separator_ = options.has_separators ? options.key_separator : ": ";
  }

  Status write(const Value& v, int depth) {
    if (depth > kMaxValueDepth) return out_of_range("value nested too deeply for tojson");
    switch (v.kind()) {
      case ValueKind::kNone: out_ += "null"; return ok_status();
      case ValueKind::kBool: out_ += v.as_bool() ? "true" : "false"; return ok_status();
      case ValueKind::kInt: out_ += std::to_string(v.as_int()); return ok_status();
      case ValueKind::kFloat: append_json_float(out_, v.as_float()); return ok_status();
      case ValueKind::kString: append_json_string(out_, v.as_string(), options_.ensure_ascii); return ok_status();
      case ValueKind::kList:
        if (!v.is_sequence_list()) break;
        return write_list(v.list().items, depth);
      case ValueKind::kDict:
        if (v.is_namespace()) break;
        return write_dict(v.dict(), depth);
      default: break;
    }
    return invalid_argument("Object of type " + type_name(v) + " is not JSON serializable");
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += options_.indent;
  }

  Status write_list(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return ok_status();
    }
    out_ += '[';
    if (options_.has_indent) newline(depth + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out_ += item_separator_;
        if (options_.has_indent) newline(depth + 1);
      }
      QRT_TRY(write(items[i], depth + 1));
    }
    if (options_.has_indent) newline(depth);
    out_ += ']';
    return ok_status();
  }

  Status write_key(const Value& key) {
    switch (key.kind()) {
      case ValueKind::kString: append_json_string(out_, key.as_string(), options_.ensure_ascii); return ok_status();
      case ValueKind::kNone: out_ += "\"null\""; return ok_status();
      case ValueKind::kBool: out_ += key.as_bool() ? "\"true\"" : "\"false\""; return ok_status();
      case ValueKind::kInt: out_ += "\"" + std::to_string(key.as_int()) + "\""; return ok_status();
      case ValueKind::kFloat: {
        out_ += '"';
        append_json_float(out_, key.as_float());
        out_ += '"';
        return ok_status();
      }
      default:
        return invalid_argument("keys must be str, int, float, bool or None, not " + type_name(key));
    }
  }

  Status write_dict(const ValueDict& dict, int depth) {
    if (dict.size() == 0) {
      out_ += "{}";
      return ok_status();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options_.sort_keys) {
      Status failure;
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        auto r = less(a->first, b->first);
        if (!r.ok()) {
          if (failure.ok()) failure = r.status();
          return false;
        }
        return *r;
      });
      QRT_TRY(failure);
    }
    out_ += '{';
    if (options_.has_indent) newline(depth + 1);
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) {
        out_ += item_separator_;
        if (options_.has_indent) newline(depth + 1);
      }
      first = false;
      QRT_TRY(write_key(entry->first));
      out_ += key_separator_;
      QRT_TRY(write(entry->second, depth + 1));
    }
    if (options_.has_indent) newline(depth);
    out_ += '}';
    return ok_status();
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
  std::string key_separator_;
  std::string out_;
};

}  // namespace

Result<Value> value_from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

Result<std::string> json_dumps(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  QRT_TRY(writer.write(value, 0));
  return writer.take();
}

}  // namespace qrt::chat
