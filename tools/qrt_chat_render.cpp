// qrt_chat_render: render a chat template with a JSON context, through qrt::chat::ChatTemplate.
//
//   qrt_chat_render TEMPLATE.jinja CONTEXT.json [--now UNIX_SECONDS]
//     prints the rendered prompt (exactly, no newline added); exit 1 with the error on stderr on failure.
//   qrt_chat_render --batch CASES.json [--now UNIX_SECONDS]
//     CASES.json: [{"template": "path.jinja", "context": {...}} or {"source": "template text", "variables":
//     {...}}, ...] (variables: exactly the template's variables); prints a JSON array of
//     {"ok": true, "output": "..."} or {"ok": false, "error": "...", "code": "..."} in the same order.
//
// The context keys messages, tools, documents, add_generation_prompt, bos_token and eos_token fill the
// ChatContext fields; every other key is an extra variable.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "models/chat/chat_template.hpp"

namespace {

using nlohmann::ordered_json;

qrt::Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return qrt::io_error("cannot open '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

qrt::Result<ordered_json> read_json(const std::string& path) {
  QRT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  ordered_json json = ordered_json::parse(text, nullptr, false);
  if (json.is_discarded()) return qrt::format_error("'" + path + "' is not valid JSON");
  return json;
}

qrt::Result<qrt::chat::ChatContext> context_from_json(const ordered_json& json) {
  if (!json.is_object()) return qrt::invalid_argument("the context must be a JSON object");
  qrt::chat::ChatContext ctx;
  for (const auto& [key, value] : json.items()) {
    if (key == "messages") {
      ctx.messages = value;
    } else if (key == "tools") {
      ctx.tools = value;
    } else if (key == "documents") {
      ctx.documents = value;
    } else if (key == "add_generation_prompt") {
      if (!value.is_boolean()) return qrt::invalid_argument("add_generation_prompt must be a boolean");
      ctx.add_generation_prompt = value.get<bool>();
    } else if ((key == "bos_token" || key == "eos_token") && value.is_string()) {
      (key == "bos_token" ? ctx.bos_token : ctx.eos_token) = value.get<std::string>();
    } else {
      ctx.extra[key] = value;
    }
  }
  return ctx;
}

qrt::Result<std::string> render(const qrt::chat::ChatTemplate& tmpl, const ordered_json& context,
                                const qrt::chat::RenderOptions& options) {
  QRT_ASSIGN_OR_RETURN(qrt::chat::ChatContext ctx, context_from_json(context));
  return tmpl.render(ctx, options);
}

int run_batch(const std::string& cases_path, const qrt::chat::RenderOptions& options) {
  auto cases = read_json(cases_path);
  if (!cases.ok() || !cases->is_array()) {
    std::fprintf(stderr, "error: %s\n", cases.ok() ? "the cases file must hold a JSON array" : cases.status().to_string().c_str());
    return 1;
  }
  std::map<std::string, qrt::Result<qrt::chat::ChatTemplate>> parsed;
  ordered_json results = ordered_json::array();
  for (const auto& c : *cases) {
    ordered_json result;
    qrt::Result<std::string> out = qrt::internal_error("unset");
    if (c.contains("source")) {
      // Inline template text rendered with exactly the given variables.
      auto tmpl = qrt::chat::ChatTemplate::parse(c.value("source", ""), "source");
      out = tmpl.ok() ? tmpl->render_variables(c.value("variables", ordered_json::object()), options)
                      : qrt::Result<std::string>(tmpl.status());
    } else {
      const std::string path = c.value("template", "");
      auto it = parsed.find(path);
      if (it == parsed.end()) {
        auto source = read_file(path);
        auto tmpl = source.ok() ? qrt::chat::ChatTemplate::parse(*source, path)
                                : qrt::Result<qrt::chat::ChatTemplate>(source.status());
        it = parsed.emplace(path, std::move(tmpl)).first;
      }
      out = it->second.ok() ? render(*it->second, c.value("context", ordered_json::object()), options)
                            : qrt::Result<std::string>(it->second.status());
    }
    if (out.ok()) {
      result["ok"] = true;
      result["output"] = *out;
    } else {
      result["ok"] = false;
      result["error"] = out.status().message();
      result["code"] = qrt::error_code_name(out.status().code());
    }
    results.push_back(std::move(result));
  }
  std::cout << results.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qrt_chat_render: render a chat template with a JSON context"};
  std::string template_path, context_path, batch_path;
  long long now_seconds = -1;
  app.add_option("template", template_path, "chat template file (Jinja)");
  app.add_option("context", context_path, "JSON object: messages, tools, add_generation_prompt, bos_token, ...");
  app.add_option("--batch", batch_path, "JSON array of {template, context} cases; prints a JSON array of results");
  app.add_option("--now", now_seconds, "the time strftime_now formats, in Unix seconds (default: now)");
  CLI11_PARSE(app, argc, argv);

  qrt::chat::RenderOptions options;
  if (now_seconds >= 0) options.now = std::chrono::system_clock::time_point(std::chrono::seconds(now_seconds));
  if (!batch_path.empty()) return run_batch(batch_path, options);
  if (template_path.empty() || context_path.empty()) {
    std::fprintf(stderr, "error: give TEMPLATE and CONTEXT, or --batch CASES\n");
    return 2;
  }
  auto source = read_file(template_path);
  auto context = read_json(context_path);
  if (!source.ok() || !context.ok()) {
    std::fprintf(stderr, "error: %s\n", (!source.ok() ? source.status() : context.status()).to_string().c_str());
    return 1;
  }
  auto tmpl = qrt::chat::ChatTemplate::parse(*source, template_path);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "error: %s\n", tmpl.status().to_string().c_str());
    return 1;
  }
  auto out = render(*tmpl, *context, options);
  if (!out.ok()) {
    std::fprintf(stderr, "error: %s\n", out.status().to_string().c_str());
    return 1;
  }
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}
