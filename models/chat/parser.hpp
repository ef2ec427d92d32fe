// Parser from tokens to the syntax tree, following Jinja2's grammar and operator precedence:
//   condexpr > or > and > not > comparisons (chained, in, not in) > + - > ~ > * / // % > ** > unary - + >
//   primary with .attr [index] [a:b:c] (call) > | filter > is test.
// Statements: if/elif/else, for (with `if` filter and else), set (names, tuples, namespace attributes, blocks),
// macro, filter, with, break, continue, raw (in the lexer), generation (transformers' tag, rendered as is).
#pragma once

#include <string>
#include <string_view>

#include "models/chat/ast.hpp"
#include "qrt/status.hpp"

namespace qrt::chat {

// Syntax errors are kFormatError and name the template, line and column; unsupported Jinja features
// (extends, include, import, call blocks, recursive loops) are kUnsupported.
Result<ast::Template> parse_template(std::string_view source, const std::string& template_name);

}  // namespace qrt::chat
