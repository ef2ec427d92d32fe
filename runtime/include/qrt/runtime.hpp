// libruntime's public C++ API: open a model, create sessions on it, feed prompts and generate tokens.
//
//   QRT_ASSIGN_OR_RETURN(qrt::Model model, qrt::Model::open("stories260K.gguf"));
//   QRT_ASSIGN_OR_RETURN(qrt::Session session, model.new_session());
//   QRT_TRY(session.add_prompt("Once upon a time"));
//   qrt::GenerateOptions gen;
//   gen.max_tokens = 64;
//   auto result = session.generate(gen, [](int32_t id, std::string_view text) {
//     std::fwrite(text.data(), 1, text.size(), stdout);
//     return true;  // false stops generation
//   });
//
// Tensor parallelism: started by `mpirun -np N`, every rank calls the same functions in the same order
// (Model::open, new_session, add_*, generate, ...) and Model::open splits the weights among the N ranks (one GPU
// each with Device::kCuda, device_index + the rank's local rank). Rank 0's prompt tokens and sampled tokens are the
// ones every rank runs; token callbacks are called on rank 0 only; an error on any rank is returned on every rank.
//
// Ownership and threads: a Model is a cheap shared handle (copies refer to the same loaded weights); a Session
// keeps its model alive and owns its own KV cache, so any number of models and sessions can live in one process,
// with no state shared between them beyond a model's weights. Calls on one Session must not overlap; Sessions
// of one model may run on different threads (the model serializes their use of its device). Errors are returned
// as Status / Result, never thrown; nothing in the library aborts or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qrt/kv_type.hpp"
#include "qrt/sampling.hpp"
#include "qrt/status.hpp"

namespace qrt {

enum class Device { kCpu, kCuda };

// This process's rank as an MPI launcher numbered it (OMPI_COMM_WORLD_RANK, PMI_RANK, ...), 0 when not started by
// one: lets a front end print from rank 0 only, even before a model is open.
int launcher_rank();

// "cpu" / "cuda".
const char* device_name(Device device);
Result<Device> device_from_name(std::string_view name);

struct ModelOptions {
  Device device = Device::kCpu;
  int device_index = 0;  // which GPU, for Device::kCuda
  // Default context (KV cache capacity, in tokens) of the model's sessions; 0 = the trained context length,
  // capped at kDefaultContextCap to bound the cache's memory. A session may ask for another size.
  int64_t context_length = 0;
  // Prompt tokens run through the model per forward call (bounds the scratch memory of long prompts).
  int64_t prompt_batch = 512;
  bool verify_ollama_digests = false;
  // When the process is one of N > 1 ranks started by an MPI launcher, split the model among them (tensor
  // parallelism). Off: every process loads the whole model, ignoring the launcher.
  bool use_launcher_ranks = true;
  // Split the model among this many ranks inside this process, one thread each (and with Device::kCuda one GPU
  // each, device_index onwards); 0 or 1: no split. Not together with an MPI launch of several ranks.
  int tensor_parallel = 0;
  // Element type of the sessions' KV caches; empty: the device's choice (f16 on CUDA, where attention reads the
  // cache at memory speed; f32 on the CPU).
  std::optional<KvType> kv_type;
  // Progress of the upload: called (from the loading threads, one call at a time) after each tensor with the
  // bytes done and the total, both counted over every rank this process loads.
  std::function<void(uint64_t done, uint64_t total)> on_load_progress;
};

inline constexpr int64_t kDefaultContextCap = 4096;

// What was loaded, for reports.
struct ModelInfo {
  std::string path;          // as the caller named it
  std::string source_kind;   // "gguf", "uqff", "hf", "ollama"
  std::string architecture;  // "llama", "qwen2", ...
  std::string device;        // the backend's name
  int vocab_size = 0;
  int64_t trained_context = 0;  // the model's own context length (0 when the config does not say)
  int64_t default_context = 0;  // what new sessions get unless they ask otherwise
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  uint64_t weight_bytes = 0;  // packed weight bytes uploaded
  KvType kv_type = KvType::kF32;  // of the sessions' KV caches
  bool has_chat_template = false;
  int tp_rank = 0;   // this process's rank among the ranks the model is split among
  int tp_world = 1;  // how many ranks that is (1: not split)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

struct SessionOptions {
  int64_t context_length = 0;  // tokens the session can hold; 0 = the model's default context
};

// How one feed of text becomes tokens.
struct PromptOptions {
  // Add the tokenizer's special tokens (BOS, ...) when this is the first text of the session's context.
  bool add_special = true;
  // Match control tokens written in the text ("<|im_start|>") as single tokens instead of plain text.
  bool parse_special = false;
};

// One generated token's log-probability and the most likely tokens at its step (most likely first; ties by id).
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

struct GenerateOptions {
  int max_tokens = 128;
  SamplingParams sampling;  // temperature 0 (the default) is greedy
  // Generation stops when the generated text contains one of these; the stop string and anything after it are
  // never streamed nor returned. Empty strings are ignored.
  std::vector<std::string> stop;
  // Stop when the model produces an end-of-generation token (EOS, EOT, <|im_end|>, ...); that token is neither
  // streamed nor returned.
  bool stop_at_end_of_generation = true;
  // Log-probabilities of the generated tokens (GenerateResult::logprobs): -1 off; n >= 0 reports each token's own
  // log-probability and the n most likely tokens at that step (at most the vocabulary). They are the model's:
  // log-softmax of the raw logits, before temperature, penalties and truncation. Costs a copy of the logits to
  // the host per token on a GPU.
  int logprobs = -1;
  // Called with each generated token's log-probabilities (when logprobs >= 0) just before the token's callback.
  std::function<void(const TokenLogprobs&)> on_logprobs;
};


enum class StopReason {
  kMaxTokens,        // max_tokens were generated
  kEndOfGeneration,  // the model produced an end-of-generation token
  kStopString,       // the text reached a stop string
  kCallback,         // the callback returned false
  kContextFull,      // the session's context has no room for another token
};
const char* stop_reason_name(StopReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (the end-of-generation token excluded)
  // The generated text, without a matched stop string and what follows it. Control tokens (BOS, <|im_start|>,
  // ...) add no text.
  std::string text;
  StopReason stop_reason = StopReason::kMaxTokens;
  std::vector<TokenLogprobs> logprobs;  // one per entry of `tokens` when GenerateOptions::logprobs >= 0
};

// Receives the generated text as it becomes final. Called once per generated token (not for an end-of-generation
// token) with `text`: the bytes that became safe to show with this token. That may be empty (the text so far
// could be the start of a stop string, or ends inside a UTF-8 character) or may include text held back from
// earlier tokens; the call for the last token of a generation carries everything still held back. When
// generation ends at an end-of-generation token with text held back, one last call passes it with token
// kNoToken. Returning false stops generation at once: there is no further call, and GenerateResult::text (which
// still has all the text) may then end with text the stream never got. Otherwise the concatenated `text`
// arguments equal GenerateResult::text.
using TokenCallback = std::function<bool(int32_t token, std::string_view text)>;
inline constexpr int32_t kNoToken = -1;

// Wall-clock times of a session since it was created or reset.
struct Timings {
  double load_seconds = 0;        // the model's Model::open
  int64_t prompt_tokens = 0;      // tokens fed by add_prompt / add_tokens / add_chat
  double prompt_seconds = 0;      // running them through the model
  int64_t generated_tokens = 0;   // tokens produced by generate
  double generation_seconds = 0;  // sampling and running them through the model
  double prompt_tokens_per_second() const { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  double generation_tokens_per_second() const {
    return generation_seconds > 0 ? generated_tokens / generation_seconds : 0;
  }
};

// Memory a session's model holds (device memory; host memory on the CPU), by owner. Under tensor parallelism: this
// process's rank 0's share (the other ranks hold the same amounts for their slices).
struct MemoryUse {
  uint64_t weights = 0;   // the model's weights as stored, uploaded once (shared by every session)
  uint64_t kv_cache = 0;  // this session's KV cache: context_length() tokens, allocated when it is created
  uint64_t kv_cache_per_token = 0;
  uint64_t scratch = 0;   // this session's per-pass buffers, sized for the largest batch run so far
  uint64_t peak = 0;      // the most the backend held at once: weights plus every session's KV cache and scratch
};

class Session;
class Engine;

namespace api_detail {
struct ModelImpl;
struct SessionState;
}  // namespace api_detail

class Model {
 public:
  // Loads a UQFF export (directory or shard), a GGUF file, an Ollama `name:tag` or a Hugging Face checkpoint
  // directory: maps its config and tensor names, builds its tokenizer (tokenizer.json, or the GGUF vocabulary)
  // and chat template (chat_template.jinja, tokenizer_config.json or GGUF tokenizer.chat_template), creates the
  // backend and uploads the weights.
  static Result<Model> open(const std::string& path_or_name, const ModelOptions& options = {});

  const ModelInfo& info() const;
  double load_seconds() const;

  // A new session with its own, empty context.
  Result<Session> new_session(const SessionOptions& options = {}) const;

  // The tokenizer, for callers that work on ids.
  Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special = true,
                                        bool parse_special = false) const;
  Result<std::string> detokenize(std::span<const int32_t> ids, bool skip_special = false) const;
  // One token's bytes as they appear inside a decoded sequence; empty for an id out of range.
  std::string token_piece(int32_t id) const;
  bool is_end_of_generation(int32_t id) const;

  // The model's chat template applied to `messages`; an error when the model has none or it fails to render.
  Result<std::string> render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;

 private:
  friend class Session;
  friend class Engine;  // schedules requests on the model's transformer
  explicit Model(std::shared_ptr<api_detail::ModelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<api_detail::ModelImpl> impl_;
};

class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Tokenizes `text` and runs it through the model, appending it to the context. A prompt that does not fit the
  // remaining context is an error (kOutOfRange) and leaves the session unchanged.
  Status add_prompt(std::string_view text, const PromptOptions& options = {});
  // The same for token ids (each must be below the model's vocabulary size).
  Status add_tokens(std::span<const int32_t> ids);
  // Renders the conversation with the model's chat template (ending with the assistant's turn) and feeds it.
  // The template renders a whole conversation, so this needs an empty session (call reset() first).
  Status add_chat(const std::vector<ChatMessage>& messages);

  // Samples up to options.max_tokens tokens continuing the context, streaming their text to `callback`.
  // Needs at least one token in the context. Generated tokens join the context, so a later add_prompt or
  // generate continues after them.
  Result<GenerateResult> generate(const GenerateOptions& options, const TokenCallback& callback = {});

  // Empties the context and the timings (the KV cache memory is kept).
  void reset();

  // Every token in the context: prompts and generated tokens.
  std::span<const int32_t> tokens() const;
  int64_t context_length() const;  // the most tokens the session can hold
  const Timings& timings() const;
  MemoryUse memory() const;
  const Model& model() const;

 private:
  friend class Model;
  explicit Session(std::unique_ptr<api_detail::SessionState> state);
  std::unique_ptr<api_detail::SessionState> state_;
};

}  // namespace qrt
