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

#ifdef __cplusplus
}
#endif

#endif
