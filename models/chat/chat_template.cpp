#include "models/chat/chat_template.hpp"

#include "models/chat/ast.hpp"
#include "models/chat/builtins.hpp"
#include "models/chat/json.hpp"
#include "models/chat/parser.hpp"

namespace qrt::chat {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string name) {
  QRT_ASSIGN_OR_RETURN(ast::Template tmpl, parse_template(source, name));
  return ChatTemplate(std::make_shared<const ast::Template>(std::move(tmpl)));
}

const std::string& ChatTemplate::name() const { return tmpl_->name; }

Result<std::string> ChatTemplate::render_variables(const nlohmann::ordered_json& variables,
                                                   const RenderOptions& options) const {
  if (!variables.is_object()) return invalid_argument(name() + ": template variables must be a JSON object");
  auto globals = std::make_shared<Scope>();
  ValueDict functions;
  add_global_functions(functions);
  for (const auto& [key, value] : functions.entries()) globals->vars[key.as_string()] = value;
  for (const auto& [key, value] : variables.items()) {
    auto converted = value_from_json(value);
    if (!converted.ok()) return converted.status().with_context(name() + ": variable '" + key + "'");
    globals->vars[key] = std::move(converted).value();
  }
  Interpreter interpreter(*tmpl_, options.limits, options.now.value_or(std::chrono::system_clock::now()));
  return interpreter.render(globals);
}

Result<std::string> ChatTemplate::render(const ChatContext& context, const RenderOptions& options) const {
  if (!context.messages.is_array()) return invalid_argument(name() + ": messages must be a JSON array");
  if (!context.extra.is_object()) return invalid_argument(name() + ": extra variables must be a JSON object");
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  variables["messages"] = context.messages;
  variables["tools"] = context.tools;
  variables["documents"] = context.documents;
  variables["add_generation_prompt"] = context.add_generation_prompt;
  if (context.bos_token) variables["bos_token"] = *context.bos_token;
  if (context.eos_token) variables["eos_token"] = *context.eos_token;
  for (const auto& [key, value] : context.extra.items()) {
    if (variables.contains(key)) {
      return invalid_argument(name() + ": extra variable '" + key + "' repeats a field of the chat context");
    }
    variables[key] = value;
  }
  return render_variables(variables, options);
}

}  // namespace qrt::chat
