/* The C client of c_api_client.c, callable from the C++ test. */
#ifndef QRT_TEST_C_API_CLIENT_H
#define QRT_TEST_C_API_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define C_CLIENT_MAX_IDS 256

struct c_client_result {
  int32_t prompt[C_CLIENT_MAX_IDS];
  size_t n_prompt;
  int32_t ids[C_CLIENT_MAX_IDS];
  size_t n_ids;
  char text[4096];
  size_t text_length;
  int stop_reason;
  int32_t vocab_size;
};

/* Returns the qrt status code of the first failing call (QRT_OK when all succeed). */
int c_client_generate(const char* model_path, const char* prompt, int max_tokens, const char* stop,
                      int stop_after_calls, struct c_client_result* out);

/* One engine request's outcome as its callbacks saw it. */
struct c_engine_result {
  int status;
  int stop_reason;
  int32_t ids[C_CLIENT_MAX_IDS];
  size_t n_ids;
  char text[4096];        /* from on_done */
  size_t text_length;
  char streamed[4096];    /* joined from on_token */
  size_t streamed_length;
  int64_t prompt_tokens;
  uint64_t id;            /* from qrt_engine_submit */
  uint64_t done_id;       /* from on_done */
};

/* Submits `n` prompts (greedy, max_tokens each) to one engine of max_running sequences at once, waits until every
 * on_done has run, then frees the engine. Request `cancel_index` (-1: none) is cancelled right after submission. */
int c_client_engine(const char* model_path, const char* const* prompts, int n, int max_tokens, int max_running,
                    int cancel_index, struct c_engine_result* out);

#ifdef __cplusplus
}
#endif

#endif
