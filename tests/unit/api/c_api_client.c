/* A plain C client of qrt/c_api.h: compiled as C, so the header is checked to be valid C. It generates greedily
 * from a model and collects the ids and text. */
#include "c_api_client.h"

#include <stdatomic.h>
#include <string.h>

#include "qrt/c_api.h"

typedef struct {
  struct c_client_result* out;
  int stop_after; /* return 0 from the callback after this many calls (0 = never) */
  int calls;
} collect_state;

static int collect(int32_t token, const char* text, size_t length, void* user_data) {
  collect_state* state = (collect_state*)user_data;
  struct c_client_result* out = state->out;
  state->calls++;
  if (token >= 0 && out->n_ids < C_CLIENT_MAX_IDS) out->ids[out->n_ids++] = token;
  if (out->text_length + length < sizeof(out->text)) {
    memcpy(out->text + out->text_length, text, length);
    out->text_length += length;
    out->text[out->text_length] = '\0';
  }
  return state->stop_after == 0 || state->calls < state->stop_after;
}

int c_client_generate(const char* model_path, const char* prompt, int max_tokens, const char* stop,
                      int stop_after_calls, struct c_client_result* out) {
  qrt_model* model = NULL;
  qrt_session* session = NULL;
  qrt_generate_params params;
  collect_state state;
  const char* stops[1];
  int rc;
  memset(out, 0, sizeof(*out));
  rc = qrt_model_open(model_path, "cpu", &model);
  if (rc != QRT_OK) return rc;
  out->vocab_size = qrt_model_vocab_size(model);
  rc = qrt_session_create(model, 0, &session);
  /* The session keeps the model alive: free the handle early on purpose. */
  qrt_model_free(model);
  if (rc != QRT_OK) return rc;
  rc = qrt_session_add_prompt(session, prompt);
  if (rc == QRT_OK) {
    out->n_prompt = qrt_session_tokens(session, out->prompt, C_CLIENT_MAX_IDS);
    qrt_generate_params_init(&params);
    params.max_tokens = max_tokens;
    if (stop != NULL) {
      stops[0] = stop;
      params.stop = stops;
      params.n_stop = 1;
    }
    state.out = out;
    state.stop_after = stop_after_calls;
    state.calls = 0;
    rc = qrt_session_generate(session, &params, collect, &state, &out->stop_reason);
  }
  qrt_session_free(session);
  return rc;
}

typedef struct {
  struct c_engine_result* out;
  atomic_int* pending;
} engine_state;

static int engine_token(int32_t token, const char* text, size_t length, void* user_data) {
  struct c_engine_result* out = ((engine_state*)user_data)->out;
  (void)token;
  if (out->streamed_length + length < sizeof(out->streamed)) {
    memcpy(out->streamed + out->streamed_length, text, length);
    out->streamed_length += length;
  }
  return 1;
}

static void engine_done(const qrt_request_result* result, void* user_data) {
  engine_state* state = (engine_state*)user_data;
  struct c_engine_result* out = state->out;
  size_t i;
  out->status = result->status;
  out->stop_reason = result->stop_reason;
  out->done_id = result->id;
  out->prompt_tokens = result->prompt_tokens;
  for (i = 0; i < result->n_tokens && i < C_CLIENT_MAX_IDS; ++i) out->ids[i] = result->tokens[i];
  out->n_ids = i;
  if (result->text_length < sizeof(out->text)) {
    memcpy(out->text, result->text, result->text_length + 1);
    out->text_length = result->text_length;
  }
  atomic_fetch_sub(state->pending, 1);
}

int c_client_engine(const char* model_path, const char* const* prompts, int n, int max_tokens, int max_running,
                    int cancel_index, struct c_engine_result* out) {
  qrt_model* model = NULL;
  qrt_engine* engine = NULL;
  qrt_engine_params params;
  engine_state states[16];
  atomic_int pending;
  int i, rc;
  if (n > 16) return QRT_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out) * (size_t)n);
  rc = qrt_model_open(model_path, "cpu", &model);
  if (rc != QRT_OK) return rc;
  qrt_engine_params_init(&params);
  params.max_running = max_running;
  rc = qrt_engine_start(model, &params, &engine);
  qrt_model_free(model); /* the engine keeps the model alive */
  if (rc != QRT_OK) return rc;
  atomic_init(&pending, n);
  for (i = 0; i < n; ++i) {
    qrt_request request;
    qrt_request_init(&request);
    request.prompt = prompts[i];
    request.params.max_tokens = max_tokens;
    request.on_token = engine_token;
    request.on_done = engine_done;
    states[i].out = &out[i];
    states[i].pending = &pending;
    request.user_data = &states[i];
    rc = qrt_engine_submit(engine, &request, &out[i].id);
    if (rc != QRT_OK) break;
    if (i == cancel_index) qrt_engine_cancel(engine, out[i].id);
  }
  if (rc == QRT_OK) {
    while (atomic_load(&pending) > 0) {
    }
  }
  qrt_engine_free(engine);
  return rc;
}
