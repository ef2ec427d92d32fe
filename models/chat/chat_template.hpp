// Chat templates: the Jinja templates shipped with models (tokenizer_config.json "chat_template", GGUF
// tokenizer.chat_template) that turn a conversation into the prompt text. Parsed once, rendered per request,
// with the semantics of Hugging Face transformers' apply_chat_template: Jinja2 with trim_blocks and
// lstrip_blocks, the loopcontrols extension, transformers' tojson, raise_exception and strftime_now.
//
//   QRT_ASSIGN_OR_RETURN(auto tmpl, qrt::chat::ChatTemplate::parse(source));
//   qrt::chat::ChatContext ctx;
//   ctx.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
//   ctx.add_generation_prompt = true;
//   ctx.bos_token = "<s>";
//   QRT_ASSIGN_OR_RETURN(std::string prompt, tmpl.render(ctx));
//
// How the engine is built (models/chat/, one room, each file one stage):
//   lexer        source -> tokens (Jinja2's whitespace control, trim/lstrip_blocks, raw blocks, comments)
//   parser       tokens -> the syntax tree of ast.hpp (parser.cpp statements, parser_expressions.cpp expressions)
//   interpreter  the tree -> text: scopes, macros, loops, limits (RenderLimits), calling into
//     value        the Python objects templates compute with (Undefined, None, bool, int, float, str, list, dict)
//     operators    Python's operators on them; text: Python's string semantics over UTF-8
//     builtins     filters (filters.cpp), methods and globals (functions.cpp); json: tojson and JSON <-> values
//
// Errors never escape as exceptions: syntax errors are kFormatError ("name:line:column: template syntax error:
// ..."); failures while rendering are kInvalidArgument ("name:line:column: ..."), including the template's own
// raise_exception ("... template raised an exception: <message>"); unsupported Jinja features are kUnsupported;
// hitting a RenderLimits bound is kOutOfRange.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "models/chat/interpreter.hpp"
#include "qrt/status.hpp"

namespace qrt::chat {

namespace ast {
struct Template;
}

// The variables a chat template sees. Objects keep their key order (tojson prints them in that order), hence
// ordered_json; an nlohmann::json converts implicitly but arrives with its keys sorted.
struct ChatContext {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, tool_calls, ...}]
  nlohmann::ordered_json tools;      // list of tool schemas; null makes `tools` none, as transformers does
  nlohmann::ordered_json documents;  // for RAG templates; null makes `documents` none
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token;  // undefined in the template when absent
  std::optional<std::string> eos_token;
  // Further variables (enable_thinking, reasoning_effort, builtin_tools, date_string, ...): a JSON object whose
  // keys must not repeat the fields above.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

struct RenderOptions {
  RenderLimits limits;
  // The time strftime_now formats, in the local time zone (as Python's datetime.now()); the current time when
  // absent.
  std::optional<std::chrono::system_clock::time_point> now;
};

class ChatTemplate {
 public:
  // `name` prefixes error messages (a model name or file path).
  static Result<ChatTemplate> parse(std::string_view source, std::string name = "chat_template");

  Result<std::string> render(const ChatContext& context, const RenderOptions& options = {}) const;
  // Renders with exactly these variables (a JSON object) plus the global functions.
  Result<std::string> render_variables(const nlohmann::ordered_json& variables,
                                       const RenderOptions& options = {}) const;

  const std::string& name() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const ast::Template> tmpl) : tmpl_(std::move(tmpl)) {}
  std::shared_ptr<const ast::Template> tmpl_;
};

}  // namespace qrt::chat
