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
 * Serving many requests at once goes through an engine (continuous batching over a paged KV cache, qrt/engine.hpp):
 *
 *   qrt_engine* engine = NULL;
 *   qrt_engine_start(model, NULL, &engine);           (NULL: the default qrt_engine_params)
 *   qrt_request request;
 *   qrt_request_init(&request);
 *   request.prompt = "Once upon a time";
 *   request.on_token = on_token;                       (streams text; runs on the engine's thread)
 *   request.on_done = on_done;                         (exactly once, with the whole result or the error)
 *   uint64_t id;
 *   qrt_engine_submit(engine, &request, &id);
 *   ...
 *   qrt_engine_free(engine);                           (requests still pending end with an error first)
 *
 * Every function returning int returns QRT_OK (0) or one of the QRT_ERR_* codes, and then qrt_last_error()
 * describes the failure. The error text is kept per thread (the only state outside the objects). Sessions and
 * engines keep their model alive: they may be freed in any order. One session must not be used from two threads
 * at once; different sessions may, and an engine's functions may be called from any thread. */
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
typedef struct qrt_engine qrt_engine;

/* One turn of a conversation, for the model's chat template. */
typedef struct qrt_chat_message {
  const char* role;    /* "system", "user", "assistant", ... (NUL-terminated) */
  const char* content; /* NUL-terminated */
} qrt_chat_message;

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

/* The tokenizer. Both write at most `capacity` elements (ids) or bytes (text: NUL-terminated when it fits) and set
 * *count / *length to the full size, so a caller may ask once with capacity 0 and again with room. */
int qrt_model_tokenize(const qrt_model* model, const char* text, int add_special, int parse_special, int32_t* ids,
                       size_t capacity, size_t* count);
int qrt_model_detokenize(const qrt_model* model, const int32_t* ids, size_t n_ids, int skip_special, char* text,
                         size_t capacity, size_t* length);
/* The model's chat template applied to `messages` (ending with the assistant's turn when add_generation_prompt);
 * QRT_ERR_NOT_FOUND when the model has none. Output as qrt_model_detokenize. */
int qrt_model_render_chat(const qrt_model* model, const qrt_chat_message* messages, size_t n_messages,
                          int add_generation_prompt, char* text, size_t capacity, size_t* length);

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

/* ---- Engine: continuous batching (qrt::Engine) ---- */

typedef struct qrt_engine_params {
  int32_t max_running;     /* requests decoded together */
  int32_t max_waiting;     /* requests queued beyond the running ones; qrt_engine_submit refuses more */
  int64_t context_length;  /* the most tokens of one request; 0 = the model's default */
  uint64_t kv_cache_bytes; /* the KV cache pool; 0 = kv_cache_fraction, or room for max_running full contexts */
  int32_t block_size;      /* tokens per KV cache block (a power of two) */
  int64_t prompt_chunk;    /* prompt tokens run per step; 0 = 512 */
  double kv_cache_fraction; /* share of the free memory the pool takes when kv_cache_bytes is 0; 0 = not used */
} qrt_engine_params;

/* What a request ended with (valid during the on_done call only). */
typedef struct qrt_request_result {
  uint64_t id;
  int status;          /* QRT_OK, or the QRT_ERR_* code of why it failed (then `error` says why) */
  const char* error;   /* NUL-terminated, "" when status is QRT_OK */
  int stop_reason;     /* QRT_STOP_* (when status is QRT_OK) */
  const int32_t* tokens;
  size_t n_tokens;
  const char* text;    /* the generated text, `text_length` bytes, NUL-terminated */
  size_t text_length;
  int64_t prompt_tokens; /* the prompt's length in tokens; -1 when it never ran */
} qrt_request_result;

typedef void (*qrt_done_callback)(const qrt_request_result* result, void* user_data);

typedef struct qrt_request {
  const char* prompt;                /* text to continue (BOS first), used when n_messages is 0 */
  const qrt_chat_message* messages;  /* or a conversation for the chat template */
  size_t n_messages;
  qrt_generate_params params;
  qrt_token_callback on_token; /* may be NULL; returning 0 cancels the request */
  qrt_done_callback on_done;   /* may be NULL */
  void* user_data;             /* passed to both */
} qrt_request;

/* The defaults of qrt::EngineOptions and an empty request with qrt_generate_params_init's parameters. */
void qrt_engine_params_init(qrt_engine_params* params);
void qrt_request_init(qrt_request* request);

/* params may be NULL (the defaults). On success *out is a new engine, else NULL. */
int qrt_engine_start(qrt_model* model, const qrt_engine_params* params, qrt_engine** out);
/* Stops the engine: requests still queued or running get on_done with an error first. NULL is ignored. */
void qrt_engine_free(qrt_engine* engine);
/* Queues a request (its strings are copied before this returns); *id identifies it. QRT_ERR_OUT_OF_RANGE when
 * max_waiting requests wait already. Callbacks run on the engine's thread and must not block it for long. */
int qrt_engine_submit(qrt_engine* engine, const qrt_request* request, uint64_t* id);
/* Stops a request at the engine's next step (on_done: QRT_STOP_CALLBACK), or drops it from the queue. */
void qrt_engine_cancel(qrt_engine* engine, uint64_t id);

typedef struct qrt_engine_counts {
  int32_t running, waiting;
  uint64_t steps, prompt_tokens, reused_prompt_tokens, generated_tokens, finished, preemptions;
  int64_t kv_blocks, kv_blocks_used, kv_blocks_cached;
  int32_t kv_block_size;
  uint64_t kv_cache_bytes;
} qrt_engine_counts;
int qrt_engine_get_counts(const qrt_engine* engine, qrt_engine_counts* out);

/* The message of this thread's last failed call ("" when none); valid until the thread's next failing call. */
const char* qrt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* QRT_C_API_H */
