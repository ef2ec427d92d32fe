/* A plain C client of qrt/c_api.h: compiled as C, so the header is checked to be valid C. It generates greedily
 * from a model and collects the ids and text. */
#include "c_api_client.h"

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
