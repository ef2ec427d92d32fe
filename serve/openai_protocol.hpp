// The OpenAI HTTP API's request and response bodies, as serve-model speaks them: parsing and checking a
// /v1/chat/completions or /v1/completions request into libruntime's options, and building the JSON of replies,
// stream chunks and errors. No HTTP here (http_server.hpp), so every rule is testable on strings.
//
// What is accepted (unknown fields are ignored, as OpenAI's own server does for forward compatibility):
//   model          must name the served model when present (404 model_not_found otherwise)
//   messages       chat: [{role, content}], content a string or a list of {type: "text", text} parts
//   prompt         completions: a string, or a list holding one string
//   max_tokens / max_completion_tokens   >= 1; default: completions 16 (OpenAI's), chat the rest of the context
//   temperature [0, 2] (default 1, as OpenAI's; 0 is greedy), top_p (0, 1], top_k >= 0, min_p [0, 1], seed
//   (integer), presence_penalty and frequency_penalty [-2, 2], repetition_penalty > 0, stop (a string or a list
//   of strings), n (1 only), stream, stream_options.include_usage
//   logprobs       chat: a boolean, with top_logprobs 0..20 alternatives; completions: 0..20 alternatives
//                  (log-softmax of the raw logits, as vLLM reports them by default)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "qrt/runtime.hpp"

namespace qrt::serve {

// An error as OpenAI reports it: HTTP status and {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending field, or empty
  std::string code;   // e.g. "model_not_found", "context_length_exceeded", or empty
};

nlohmann::json error_body(const ApiError& e);

enum class Endpoint { kChat, kCompletion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  GenerateOptions generate;
  bool max_tokens_given = false;  // else chat generates until the end of generation or of the context
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // -1: no logprobs; else the number of alternatives per token (also in generate.logprobs)
  int logprobs = -1;
};

// Parses and checks a request body; `served_model` is the one name this server answers to.
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint,
                                                                   const std::string& served_model);

// "stop" (the end of generation or a stop string) or "length" (max_tokens or the context).
const char* finish_reason(StopReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// The identity of one response: its id ("chatcmpl-…" / "cmpl-…"), creation time and the model name.
struct ResponseHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// The "logprobs" object of a choice for these tokens: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {"tokens", "token_logprobs", "top_logprobs", "text_offset"} with offsets from `text_offset`.
// A log-probability of -inf (a token the model rules out) is written as -9999.0, as OpenAI does.
using TokenText = std::function<std::string(int32_t)>;
nlohmann::json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens, const TokenText& text_of,
                             int64_t text_offset = 0);

// A whole (non-streamed) response; `logprobs` null when not asked for.
nlohmann::json completion_response(Endpoint endpoint, const ResponseHeader& h, const std::string& text,
                                   const char* finish, const Usage& usage, nlohmann::json logprobs = nullptr);

// One streamed chunk. Chat: `role_chunk` gives the first chunk (delta {role: "assistant", content: ""}); a chunk
// with `finish` set has an empty delta (chat) or text (completions) and that finish_reason.
nlohmann::json stream_chunk(Endpoint endpoint, const ResponseHeader& h, std::string_view text, const char* finish,
                            bool role_chunk = false, nlohmann::json logprobs = nullptr);
// The last chunk when stream_options.include_usage is set: no choices, the usage.
nlohmann::json usage_chunk(Endpoint endpoint, const ResponseHeader& h, const Usage& usage);

// "data: <json>\n\n", and the stream's end "data: [DONE]\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// GET /v1/models.
nlohmann::json models_response(const std::string& served_model, int64_t created);

}  // namespace qrt::serve
