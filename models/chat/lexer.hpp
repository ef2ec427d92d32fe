// Tokenizer for the Jinja template language, reproducing Jinja2's lexer: template data between tags, whitespace
// control ({%- -%} {{- -}} {#- -#}, and `+` to opt out), trim_blocks (drop the first newline after a block or
// comment tag), lstrip_blocks (drop spaces and tabs before a block or comment tag that starts its line), raw
// blocks, comments, newline normalization, the dropped trailing newline, and the expression tokens inside tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qrt/status.hpp"

namespace qrt::chat {

enum class TokenKind : uint8_t {
  kData,           // template text (raw blocks included), whitespace control already applied
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,         // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,       // text holds the spelling: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
};

// Transformers renders chat templates with trim_blocks and lstrip_blocks on and keep_trailing_newline off.
struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Errors (kFormatError) name the template, line and column: unterminated comments, raw blocks and strings,
// unexpected characters, unbalanced brackets, bad escapes, source that is not UTF-8.
Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options,
                                    const std::string& template_name);

}  // namespace qrt::chat
