// Conversions between nlohmann JSON and template values, and Python's json.dumps as chat templates use it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/chat/value.hpp"

namespace qrt::chat {

// JSON -> value: objects keep their key order (use nlohmann::ordered_json to preserve it from the source text).
// Errors for strings that are not UTF-8, integers beyond int64 and nesting deeper than kMaxValueDepth.
Result<Value> value_from_json(const nlohmann::ordered_json& json);

// The options of Python's json.dumps that templates pass through the tojson filter.
struct JsonDumpOptions {
  bool ensure_ascii = false;   // transformers' tojson default: keep non-ASCII text as is
  bool has_indent = false;     // indent=None when false
  std::string indent;          // the text of one indentation level (indent=4 -> four spaces)
  std::string item_separator;  // default ", " without indent, "," with
  std::string key_separator = ": ";
  bool has_separators = false;
  bool sort_keys = false;
};

// json.dumps(value): floats as Python's repr, NaN/Infinity allowed, keys converted like Python's (True -> "true").
// Errors for values JSON cannot hold (Undefined, generators, namespaces, macros) as Python raises TypeError.
Result<std::string> json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace qrt::chat
