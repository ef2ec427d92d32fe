// The C ABI over qrt::Engine (qrt/c_api.h): requests with C callbacks, forwarded from the engine's thread.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "qrt/engine.hpp"
#include "runtime/src/c_api_internal.hpp"

struct qrt_engine {
  qrt::Model model;  // keeps the model alive while the engine runs
  std::unique_ptr<qrt::Engine> engine;
};

using qrt::c_api::fail;
using qrt::c_api::guarded;

extern "C" {

void qrt_engine_params_init(qrt_engine_params* params) {
  if (params == nullptr) return;
  const qrt::EngineOptions defaults;
  params->max_running = defaults.max_running;
  params->max_waiting = defaults.max_waiting;
  params->context_length = defaults.context_length;
  params->kv_cache_bytes = defaults.kv_cache_bytes;
  params->block_size = defaults.block_size;
  params->prompt_chunk = defaults.prompt_chunk;
  params->kv_cache_fraction = defaults.kv_cache_fraction;
}

void qrt_request_init(qrt_request* request) {
  if (request == nullptr) return;
  *request = qrt_request{};
  qrt_generate_params_init(&request->params);
}

int qrt_engine_start(qrt_model* model, const qrt_engine_params* params, qrt_engine** out) {
  if (out == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_start: out is NULL");
  *out = nullptr;
  if (model == nullptr) return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_start: model is NULL");
  return guarded([&]() -> int {
    qrt_engine_params p;
    qrt_engine_params_init(&p);
    if (params != nullptr) p = *params;
    if (p.kv_cache_bytes > static_cast<uint64_t>(INT64_MAX))
      return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_start: kv_cache_bytes is too large");
    qrt::EngineOptions options;
    options.max_running = p.max_running;
    options.max_waiting = p.max_waiting;
    options.context_length = p.context_length;
    options.kv_cache_bytes = p.kv_cache_bytes;
    options.block_size = p.block_size;
    options.prompt_chunk = p.prompt_chunk;
    options.kv_cache_fraction = p.kv_cache_fraction;
    auto engine = qrt::Engine::start(model->model, options);
    if (!engine.ok()) return fail(engine.status());
    *out = new qrt_engine{model->model, std::move(*engine)};
    return QRT_OK;
  });
}

void qrt_engine_free(qrt_engine* engine) { delete engine; }

int qrt_engine_submit(qrt_engine* engine, const qrt_request* request, uint64_t* id) {
  if (engine == nullptr || request == nullptr || id == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_submit: engine, request or id is NULL");
  if (request->n_messages == 0 && request->prompt == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_submit: neither a prompt nor messages");
  if (request->n_messages > 0 && request->messages == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_submit: n_messages > 0 but messages is NULL");
  return guarded([&]() -> int {
    auto options = qrt::c_api::generate_options(request->params, "qrt_engine_submit");
    if (!options.ok()) return fail(options.status());
    auto messages = qrt::c_api::chat_messages(request->messages, request->n_messages, "qrt_engine_submit");
    if (!messages.ok()) return fail(messages.status());
    qrt::EngineRequest r;
    if (request->n_messages == 0) r.prompt = request->prompt;
    r.messages = std::move(*messages);
    r.options = std::move(*options);
    // The callbacks share the prompt length (on_started) and the id, which the engine hands out in submit(): its
    // thread may finish the request before submit() has returned here, so on_done waits for the id's publication
    // (a few instructions after submit() returns).
    struct Shared {
      std::atomic<uint64_t> id{0};
      int64_t prompt_tokens = -1;
    };
    auto shared = std::make_shared<Shared>();
    r.on_started = [shared](int64_t n) { shared->prompt_tokens = n; };
    if (request->on_token != nullptr) {
      r.on_token = [cb = request->on_token, user = request->user_data](int32_t token, std::string_view text) {
        return cb(token, text.data(), text.size(), user) != 0;
      };
    }
    r.on_done = [shared, cb = request->on_done, user = request->user_data](qrt::Result<qrt::GenerateResult> done) {
      if (cb == nullptr) return;
      qrt_request_result out{};
      while ((out.id = shared->id.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      out.prompt_tokens = shared->prompt_tokens;
      const std::string error = done.ok() ? std::string() : done.status().to_string();
      const std::string empty;
      out.status = done.ok() ? QRT_OK : static_cast<int>(done.status().code());
      out.error = error.c_str();
      out.text = empty.c_str();
      if (done.ok()) {
        out.stop_reason = static_cast<int>(done->stop_reason);
        out.tokens = done->tokens.data();
        out.n_tokens = done->tokens.size();
        out.text = done->text.c_str();
        out.text_length = done->text.size();
      }
      cb(&out, user);
    };
    auto submitted = engine->engine->submit(std::move(r));
    if (!submitted.ok()) return fail(submitted.status());
    shared->id.store(*submitted, std::memory_order_release);  // ids start at 1
    *id = *submitted;
    return QRT_OK;
  });
}

void qrt_engine_cancel(qrt_engine* engine, uint64_t id) {
  if (engine != nullptr) engine->engine->cancel(id);
}

int qrt_engine_get_counts(const qrt_engine* engine, qrt_engine_counts* out) {
  if (engine == nullptr || out == nullptr)
    return fail(QRT_ERR_INVALID_ARGUMENT, "qrt_engine_get_counts: engine or out is NULL");
  const qrt::EngineCounts c = engine->engine->counts();
  out->running = c.running;
  out->waiting = c.waiting;
  out->steps = c.steps;
  out->prompt_tokens = c.prompt_tokens;
  out->reused_prompt_tokens = c.reused_prompt_tokens;
  out->generated_tokens = c.generated_tokens;
  out->finished = c.finished;
  out->preemptions = c.preemptions;
  out->kv_blocks = c.kv_blocks;
  out->kv_blocks_used = c.kv_blocks_used;
  out->kv_blocks_cached = c.kv_blocks_cached;
  out->kv_block_size = c.kv_block_size;
  out->kv_cache_bytes = c.kv_cache_bytes;
  return QRT_OK;
}

}  // extern "C"
