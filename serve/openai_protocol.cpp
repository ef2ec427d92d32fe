#include "serve/openai_protocol.hpp"

#include <cmath>
#include <limits>

namespace qrt::serve {
namespace {

using nlohmann::json;

ApiError bad(std::string message, std::string param = {}) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

// A number field within [lo, hi] (hi_open: hi itself excluded; lo_open likewise); absent leaves `out` alone.
std::optional<ApiError> read_number(const json& body, const char* name, double lo, double hi, bool lo_open,
                                    bool hi_open, float* out) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return bad(std::string(name) + " must be a number", name);
  const double v = it->get<double>();
  const bool below = lo_open ? v <= lo : v < lo;
  const bool above = hi_open ? v >= hi : v > hi;
  if (!std::isfinite(v) || below || above) {
    return bad(std::string(name) + " must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " +
                   (std::isinf(hi) ? std::string("inf") : json(hi).dump()) + (hi_open ? ")" : "]") + ", got " +
                   it->dump(),
               name);
  }
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& body, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return bad(std::string(name) + " must be an integer", name);
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : it->get<int64_t>();
  if (v < lo || v > hi)
    return bad(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                   it->dump(),
               name);
  *out = v;
  return std::nullopt;
}

// Chat content: a string, or text parts [{type: "text", text: "..."}] joined in order.
std::optional<ApiError> read_content(const json& content, size_t index, std::string* out) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (content.is_null()) {
    out->clear();
    return std::nullopt;
  }
  if (!content.is_array()) return bad(param + " must be a string or a list of text parts", param);
  out->clear();
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      return bad(param + ": only parts of type \"text\" with a string \"text\" are supported", param);
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const json& body, std::vector<ChatMessage>* out) {
  const auto it = body.find("messages");
  if (it == body.end()) return bad("messages is required", "messages");
  if (!it->is_array() || it->empty()) return bad("messages must be a non-empty list", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(param + " must be an object", param);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get<std::string>().empty())
      return bad(param + ".role must be a non-empty string", param + ".role");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (auto e = read_content(m.value("content", json()), i, &msg.content)) return e;
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> read_prompt(const json& body, std::string* out) {
  const auto it = body.find("prompt");
  if (it == body.end()) return bad("prompt is required", "prompt");
  if (it->is_string()) {
    *out = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    *out = (*it)[0].get<std::string>();
  } else {
    return bad("prompt must be a string or a list of one string (batches of prompts are not supported)", "prompt");
  }
  if (out->empty()) return bad("prompt must not be empty", "prompt");
  return std::nullopt;
}

std::optional<ApiError> read_stop(const json& body, std::vector<std::string>* out) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
    return std::nullopt;
  }
  if (!it->is_array()) return bad("stop must be a string or a list of strings", "stop");
  for (const json& s : *it) {
    if (!s.is_string()) return bad("stop must be a string or a list of strings", "stop");
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_sampling(const json& body, SamplingParams* s) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (auto e = read_number(body, "temperature", 0, 2, false, false, &s->temperature)) return e;
  if (auto e = read_number(body, "top_p", 0, 1, true, false, &s->top_p)) return e;
  if (auto e = read_number(body, "min_p", 0, 1, false, false, &s->min_p)) return e;
  if (auto e = read_number(body, "presence_penalty", -2, 2, false, false, &s->presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", -2, 2, false, false, &s->frequency_penalty)) return e;
  if (auto e = read_number(body, "repetition_penalty", 0, kInf, true, true, &s->repetition_penalty)) return e;
  int64_t top_k = s->top_k;
  if (auto e = read_int(body, "top_k", 0, INT32_MAX, &top_k)) return e;
  s->top_k = static_cast<int>(top_k);
  int64_t seed = 0;
  if (auto e = read_int(body, "seed", INT64_MIN, INT64_MAX, &seed)) return e;
  s->seed = static_cast<uint64_t>(seed);
  return std::nullopt;
}

// Chat: "logprobs": true with "top_logprobs" 0..20 (top_logprobs without logprobs is an error, as in OpenAI's API).
// Completions: "logprobs": 0..20 alternatives.
std::optional<ApiError> read_logprobs(const json& body, Endpoint endpoint, int* out) {
  constexpr int64_t kMaxTop = 20;
  const auto it = body.find("logprobs");
  const bool given = it != body.end() && !it->is_null();
  if (endpoint == Endpoint::kCompletion) {
    if (!given || (it->is_boolean() && !it->get<bool>())) return std::nullopt;  // false: off, as null
    int64_t top = 0;
    if (auto e = read_int(body, "logprobs", 0, kMaxTop, &top)) return e;
    *out = static_cast<int>(top);
    return std::nullopt;
  }
  if (given && !it->is_boolean()) return bad("logprobs must be a boolean", "logprobs");
  const bool on = given && it->get<bool>();
  int64_t top = 0;
  if (auto e = read_int(body, "top_logprobs", 0, kMaxTop, &top)) return e;
  const auto t = body.find("top_logprobs");
  if (!on && t != body.end() && !t->is_null()) return bad("top_logprobs needs logprobs set to true", "top_logprobs");
  if (on) *out = static_cast<int>(top);
  return std::nullopt;
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json() : json(e.param)},
            {"code", e.code.empty() ? json() : json(e.code)}}}};
}

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint,
                                                                   const std::string& served_model) {
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("the request body is not valid JSON");
  if (!j.is_object()) return bad("the request body must be a JSON object");

  if (const auto model = j.find("model"); model != j.end() && !model->is_null()) {
    if (!model->is_string()) return bad("model must be a string", "model");
    if (model->get<std::string>() != served_model) {
      ApiError e = bad("The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                           served_model + "'",
                       "model");
      e.status = 404;
      e.code = "model_not_found";
      return e;
    }
  }

  CompletionRequest r;
  r.endpoint = endpoint;
  r.generate.sampling.temperature = 1.0f;  // OpenAI's default; 0 asks for greedy decoding
  if (endpoint == Endpoint::kChat) {
    if (auto e = read_messages(j, &r.messages)) return *e;
  } else {
    if (auto e = read_prompt(j, &r.prompt)) return *e;
  }

  int64_t n = 1;
  if (auto e = read_int(j, "n", 1, INT64_MAX, &n)) return *e;
  if (n != 1) return bad("n must be 1: one choice per request is supported", "n");
  if (auto e = read_logprobs(j, endpoint, &r.logprobs)) return *e;
  r.generate.logprobs = r.logprobs;

  // Completions default to OpenAI's 16 tokens; chat to the rest of the context (max_tokens is optional there).
  int64_t max_tokens = endpoint == Endpoint::kCompletion ? 16 : INT32_MAX;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (j.contains(name) && !j[name].is_null()) r.max_tokens_given = true;
    if (auto e = read_int(j, name, 1, INT32_MAX, &max_tokens)) return *e;
  }
  r.generate.max_tokens = static_cast<int>(max_tokens);
  if (auto e = read_sampling(j, &r.generate.sampling)) return *e;
  if (auto e = read_stop(j, &r.generate.stop)) return *e;

  if (const auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be a boolean", "stream");
    r.stream = it->get<bool>();
  }
  // vLLM's extension: go on past the end-of-generation token (benchmarks that need a fixed output length).
  if (const auto it = j.find("ignore_eos"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("ignore_eos must be a boolean", "ignore_eos");
    r.generate.stop_at_end_of_generation = !it->get<bool>();
  }
  if (const auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("stream_options must be an object", "stream_options");
    const auto usage = it->find("include_usage");
    if (usage != it->end() && !usage->is_null()) {
      if (!usage->is_boolean()) return bad("stream_options.include_usage must be a boolean", "stream_options");
      r.include_usage = usage->get<bool>();
    }
  }
  return r;
}

const char* finish_reason(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration:
    case StopReason::kStopString:
    case StopReason::kCallback: return "stop";
    case StopReason::kMaxTokens:
    case StopReason::kContextFull: return "length";
  }
  return "stop";
}

namespace {
json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}
json header_json(Endpoint endpoint, const ResponseHeader& h, bool chunk) {
  const char* object = endpoint == Endpoint::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                   : "text_completion";
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}
}  // namespace

namespace {
double finite_logprob(float v) { return std::isfinite(v) ? static_cast<double>(v) : -9999.0; }
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens, const TokenText& text_of,
                   int64_t text_offset) {
  if (endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const TokenLogprobs& t : tokens) {
      const std::string piece = text_of(t.token);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string alt = text_of(id);
        top.push_back({{"token", alt}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(alt)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", finite_logprob(t.logprob)},
                         {"bytes", bytes_of(piece)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string piece = text_of(t.token);
    toks.push_back(piece);
    lps.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[text_of(id)] = finite_logprob(lp);
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(piece.size());
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json completion_response(Endpoint endpoint, const ResponseHeader& h, const std::string& text, const char* finish,
                         const Usage& usage, json logprobs) {
  json r = header_json(endpoint, h, false);
  json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", std::move(logprobs)}};
  if (endpoint == Endpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(usage);
  return r;
}

json stream_chunk(Endpoint endpoint, const ResponseHeader& h, std::string_view text, const char* finish,
                  bool role_chunk, json logprobs) {
  json r = header_json(endpoint, h, true);
  json choice = {{"index", 0}, {"finish_reason", finish ? json(finish) : json()}, {"logprobs", std::move(logprobs)}};
  if (endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (role_chunk) delta = {{"role", "assistant"}, {"content", ""}};
    else if (!finish) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  r["choices"] = json::array({choice});
  return r;
}

json usage_chunk(Endpoint endpoint, const ResponseHeader& h, const Usage& usage) {
  json r = header_json(endpoint, h, true);
  r["choices"] = json::array();
  r["usage"] = usage_json(usage);
  return r;
}

std::string sse_event(const json& j) {
  // Invalid UTF-8 (a token boundary inside a character is held back by libruntime, but a model can still emit
  // a broken byte sequence) is replaced rather than failing the stream.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json models_response(const std::string& served_model, int64_t created) {
  const json model = {{"id", served_model}, {"object", "model"}, {"created", created}, {"owned_by", "qrt"}};
  return {{"object", "list"}, {"data", json::array({model})}};
}

}  // namespace qrt::serve
