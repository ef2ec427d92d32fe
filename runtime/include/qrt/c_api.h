/* libruntime's C ABI: a small, stable surface over the C++ API (qrt/runtime.hpp) for other languages.
 *
 *   qrt_model* model = NULL;
 *   if (qrt_model_open("stories260K.gguf", "cpu", &model) != QRT_OK) { fprintf(stderr, "%s\n", qrt_last_error()); }
 *   qrt_session* session = NULL;
 *   qrt_session_create(model, 0, &session);
 *   qrt_session_add_prompt(session, "Once upon a time");
 *   qrt_generate_params params;
 *   qrt_generate_params_init(&params);
 *   params.max_tokens = 64;
 *   qrt_session_generate(session, &params, on_token, user_data, NULL);
 *   qrt_session_free(session);
 *   qrt_model_free(model);
 *
 * Every function returning int returns QRT_OK (0) or one of the QRT_ERR_* codes, and then qrt_last_error()
 * describes the failure. The error text is kept per thread (the only state outside the objects). A session
 * keeps its model alive: the two may be freed in any order. One session must not be used from two threads at
 * once; different sessions may. */
#ifndef QRT_C_API_H
#define QRT_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (the values of qrt::ErrorCode). */
enum {
  QRT_OK = 0,
  QRT_ERR_INVALID_ARGUMENT = 1,
  QRT_ERR_NOT_FOUND = 2,
  QRT_ERR_IO = 3,
  QRT_ERR_FORMAT = 4,
  QRT_ERR_UNSUPPORTED = 5,
  QRT_ERR_OUT_OF_RANGE = 6,
  QRT_ERR_CUDA = 7,
  QRT_ERR_INTERNAL = 8
};

/* Why a generation ended (qrt::StopReason). */
enum {
  QRT_STOP_MAX_TOKENS = 0,
  QRT_STOP_END_OF_GENERATION = 1,
  QRT_STOP_STRING = 2,
  QRT_STOP_CALLBACK = 3,
  QRT_STOP_CONTEXT_FULL = 4
};

typedef struct qrt_model qrt_model;
typedef struct qrt_session qrt_session;

typedef struct qrt_generate_params {
  int32_t max_tokens;
  float temperature; /* 0 = greedy */
  int32_t top_k;     /* 0 = off */
  float top_p;       /* 1 = off */
  float min_p;       /* 0 = off */
  float repetition_penalty;
  float presence_penalty;
  float frequency_penalty;
  int32_t penalty_last_n;
  uint64_t seed;
  const char* const* stop; /* stop strings (NUL-terminated), n_stop of them; may be NULL when n_stop is 0 */
  size_t n_stop;
  int32_t stop_at_end_of_generation; /* nonzero: stop at EOS / end-of-turn tokens */
} qrt_generate_params;

/* Receives generated text as it becomes final: `text` (not NUL-terminated) holds `length` bytes, possibly 0.
 * Called once per generated token, and once more with token -1 for text held back at an end-of-generation
 * token (see qrt::TokenCallback). Return nonzero to continue, 0 to stop. */
typedef int (*qrt_token_callback)(int32_t token, const char* text, size_t length, void* user_data);

/* The defaults of qrt::GenerateOptions: greedy, 128 tokens, stop at end of generation. */
void qrt_generate_params_init(qrt_generate_params* params);

/* device: "cpu" or "cuda" (NULL = "cpu"). On success *out is a new model, else NULL. */
int qrt_model_open(const char* path_or_name, const char* device, qrt_model** out);
void qrt_model_free(qrt_model* model); /* NULL is ignored */
/* The model's vocabulary size and default context length (0 for a NULL model). */
int32_t qrt_model_vocab_size(const qrt_model* model);
int64_t qrt_model_context_length(const qrt_model* model);

/* context_length 0 = the model's default. On success *out is a new session, else NULL. */
int qrt_session_create(qrt_model* model, int64_t context_length, qrt_session** out);
void qrt_session_free(qrt_session* session); /* NULL is ignored */
/* Tokenizes and runs `text` (NUL-terminated) through the model; BOS is added at the start of the context. */
int qrt_session_add_prompt(qrt_session* session, const char* text);
int qrt_session_add_tokens(qrt_session* session, const int32_t* ids, size_t count);
/* Generates; `callback` may be NULL. stop_reason (may be NULL) receives a QRT_STOP_* value. */
int qrt_session_generate(qrt_session* session, const qrt_generate_params* params, qrt_token_callback callback,
                         void* user_data, int* stop_reason);
void qrt_session_reset(qrt_session* session);
/* The context's tokens: returns how many there are and copies up to `capacity` of them into `ids` (may be NULL). */
size_t qrt_session_tokens(const qrt_session* session, int32_t* ids, size_t capacity);

/* The message of this thread's last failed call ("" when none); valid until the thread's next failing call. */
const char* qrt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* QRT_C_API_H */
