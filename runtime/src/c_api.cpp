// The C ABI over qrt::Model / qrt::Session. No exception crosses it: each entry point catches and reports.
#include "qrt/c_api.h"

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/src/c_api_internal.hpp"

struct qrt_session {
  qrt::Session session;
};

namespace qrt::c_api {

static_assert(QRT_ERR_INVALID_ARGUMENT == static_cast<int>(qrt::ErrorCode::kInvalidArgument));
static_assert(QRT_ERR_INTERNAL == static_cast<int>(qrt::ErrorCode::kInternal));
static_assert(QRT_STOP_CONTEXT_FULL == static_cast<int>(qrt::StopReason::kContextFull));

std::string& last_error() {
  // The C convention (errno, dlerror) for calls that fail before any object exists to hold the error.
  thread_local std::string message;
  return message;
}

qrt::Result<qrt::GenerateOptions> generate_options(const qrt_generate_params& params, const char* who) {
  if (params.n_stop > 0 && params.stop == nullptr)
    return qrt::invalid_argument(std::string(who) + ": n_stop > 0 but stop is NULL");
  qrt::GenerateOptions options;
  options.max_tokens = params.max_tokens;
  options.sampling.temperature = params.temperature;
  options.sampling.top_k = params.top_k;
  options.sampling.top_p = params.top_p;
  options.sampling.min_p = params.min_p;
  options.sampling.repetition_penalty = params.repetition_penalty;
  options.sampling.presence_penalty = params.presence_penalty;
  options.sampling.frequency_penalty = params.frequency_penalty;
  options.sampling.penalty_last_n = params.penalty_last_n;
  options.sampling.seed = params.seed;
  options.stop_at_end_of_generation = params.stop_at_end_of_generation != 0;
  for (size_t i = 0; i < params.n_stop; ++i) {
    if (params.stop[i] == nullptr)
      return qrt::invalid_argument(std::string(who) + ": stop[" + std::to_string(i) + "] is NULL");
    options.stop.emplace_back(params.stop[i]);
  }
  return options;
}

qrt::Result<std::vector<qrt::ChatMessage>> chat_messages(const qrt_chat_message* messages, size_t n, const char* who) {
  std::vector<qrt::ChatMessage> out;
  for (size_t i = 0; i < n; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr)
      return qrt::invalid_argument(std::string(who) + ": message " + std::to_string(i) + " has a NULL role or content");
    out.push_back({messages[i].role, messages[i].content});
  }
  return out;
}

}  // namespace qrt::c_api

using qrt::c_api::fail;
using qrt::c_api::guarded;
using qrt::c_api::report;

extern "C" {

void qrt_generate_params_init(qrt_generate_params* params) {
  if (params == nullptr) return;
  const qrt::GenerateOptions defaults;
  params->max_tokens = defaults.max_tokens;
  params->temperature = defaults.sampling.temperature;
  params->top_k = defaults.sampling.top_k;
  params->top_p = defaults.sampling.top_p;
  params->min_p = defaults.sampling.min_p;
  params->repetition_penalty = defaults.sampling.repetition_penalty;
  params->presence_penalty = defaults.sampling.presence_penalty;
  params->frequency_penalty = defaults.sampling.frequency_penalty;
  params->penalty_last_n = defaults.sampling.penalty_last_n;
  params->seed = defaults.sampling.seed;
  params->stop = nullptr;
  params->n_stop = 0;
  params->stop_at_end_of_generation = defaults.stop_at_end_of_generation ? 1 : 0;
}

int qrt_model_open(const char* path_or_name, const char* device, qrt_model** out) {
  if (out == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_model_open: out is NULL");
  *out = nullptr;
  if (path_or_name == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_model_open: path_or_name is NULL");
  return guarded([&]() -> int {
    qrt::ModelOptions options;
    if (device != nullptr) {
      auto parsed = qrt::device_from_name(device);
      if (!parsed.ok()) return fail(parsed.status());
      options.device = *parsed;
    }
    auto model = qrt::Model::open(path_or_name, options);
    if (!model.ok()) return fail(model.status());
    *out = new qrt_model{std::move(*model)};
    return QRT_OK;
  });
}

void qrt_model_free(qrt_model* model) { delete model; }

int32_t qrt_model_vocab_size(const qrt_model* model) { return model ? model->model.info().vocab_size : 0; }

int64_t qrt_model_context_length(const qrt_model* model) { return model ? model->model.info().default_context : 0; }

int qrt_model_tokenize(const qrt_model* model, const char* text, int add_special, int parse_special, int32_t* ids,
                       size_t capacity, size_t* count) {
  if (model == nullptr || text == nullptr || count == nullptr || (ids == nullptr && capacity > 0))
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_model_tokenize: model, text, count or ids is NULL");
  return guarded([&]() -> int {
    auto tokens = model->model.tokenize(text, add_special != 0, parse_special != 0);
    if (!tokens.ok()) return fail(tokens.status());
    *count = tokens->size();
    std::copy_n(tokens->begin(), std::min(capacity, tokens->size()), ids);
    return QRT_OK;
  });
}

namespace {

// Text out through a caller's buffer: as much as fits, NUL-terminated when there is room, and the full length.
int give_text(const qrt::Result<std::string>& text, char* out, size_t capacity, size_t* length) {
  if (!text.ok()) return fail(text.status());
  *length = text->size();
  const size_t n = std::min(capacity, text->size());
  std::copy_n(text->data(), n, out);
  if (n < capacity) out[n] = '\0';
  return QRT_OK;
}

}  // namespace

int qrt_model_detokenize(const qrt_model* model, const int32_t* ids, size_t n_ids, int skip_special, char* text,
                         size_t capacity, size_t* length) {
  if (model == nullptr || (ids == nullptr && n_ids > 0) || length == nullptr || (text == nullptr && capacity > 0))
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_model_detokenize: model, ids, text or length is NULL");
  return guarded([&]() -> int {
    return give_text(model->model.detokenize(std::span<const int32_t>(ids, n_ids), skip_special != 0), text, capacity,
                     length);
  });
}

int qrt_model_render_chat(const qrt_model* model, const qrt_chat_message* messages, size_t n_messages,
                          int add_generation_prompt, char* text, size_t capacity, size_t* length) {
  if (model == nullptr || (messages == nullptr && n_messages > 0) || length == nullptr ||
      (text == nullptr && capacity > 0))
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_model_render_chat: model, messages, text or length is NULL");
  return guarded([&]() -> int {
    auto converted = qrt::c_api::chat_messages(messages, n_messages, "qrt_model_render_chat");
    if (!converted.ok()) return fail(converted.status());
    return give_text(model->model.render_chat(*converted, add_generation_prompt != 0), text, capacity, length);
  });
}

int qrt_session_create(qrt_model* model, int64_t context_length, qrt_session** out) {
  if (out == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_session_create: out is NULL");
  *out = nullptr;
  if (model == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_session_create: model is NULL");
  return guarded([&]() -> int {
    qrt::SessionOptions options;
    options.context_length = context_length;
    auto session = model->model.new_session(options);
    if (!session.ok()) return fail(session.status());
    *out = new qrt_session{std::move(*session)};
    return QRT_OK;
  });
}

void qrt_session_free(qrt_session* session) { delete session; }

int qrt_session_add_prompt(qrt_session* session, const char* text) {
  if (session == nullptr || text == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_session_add_prompt: session or text is NULL");
  return guarded([&]() -> int { return report(session->session.add_prompt(text)); });
}

int qrt_session_add_tokens(qrt_session* session, const int32_t* ids, size_t count) {
  if (session == nullptr || (ids == nullptr && count > 0))
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_session_add_tokens: session or ids is NULL");
  return guarded([&]() -> int { return report(session->session.add_tokens(std::span<const int32_t>(ids, count))); });
}

int qrt_session_generate(qrt_session* session, const qrt_generate_params* params, qrt_token_callback callback,
                         void* user_data, int* stop_reason) {
  if (session == nullptr || params == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_session_generate: session or params is NULL");
  return guarded([&]() -> int {
    auto options = qrt::c_api::generate_options(*params, "qrt_session_generate");
    if (!options.ok()) return fail(options.status());
    qrt::TokenCallback forward;
    if (callback != nullptr) {
      forward = [&](int32_t token, std::string_view text) {
        return callback(token, text.data(), text.size(), user_data) != 0;
      };
    }
    auto result = session->session.generate(*options, forward);
    if (!result.ok()) return fail(result.status());
    if (stop_reason != nullptr) *stop_reason = static_cast<int>(result->stop_reason);
    return QRT_OK;
  });
}

void qrt_session_reset(qrt_session* session) {
  if (session != nullptr) session->session.reset();
}

size_t qrt_session_tokens(const qrt_session* session, int32_t* ids, size_t capacity) {
  if (session == nullptr) return 0;
  const std::span<const int32_t> tokens = session->session.tokens();
  if (ids != nullptr) {
    for (size_t i = 0; i < tokens.size() && i < capacity; ++i) ids[i] = tokens[i];
  }
  return tokens.size();
}

const char* qrt_last_error(void) { return qrt::c_api::last_error().c_str(); }

}  // extern "C"
