// Continuous batching over one model with a paged KV cache: requests join and leave at every step, and every step
// decodes one token of every running request in one pass (Transformer::decode_batch: each weight matrix is read
// once per step for all of them). Requests are admitted first come first served while a sequence is free and the
// pool has blocks for the prompt; prompts run in chunks inside the decode passes (one pass holds every running
// request's next token and up to prompt_chunk prompt tokens, so a long prompt does not stall the others), starting
// from cached blocks of earlier requests with the same first tokens. When the pool runs out
// of blocks, the most recently admitted request is preempted: its blocks are returned and it waits at the front of
// the queue to be recomputed from its prompt and the tokens it has produced (its sampler state is kept). On a
// backend with a sample op (CUDA) the rows of a step are sampled on the device, one op per group of requests with
// equal sampling parameters, so one id per row comes back instead of a row of logits.
//
//   auto engine = qrt::Engine::start(model, {.max_running = 8});
//   qrt::EngineRequest r;
//   r.prompt = "Once upon a time";
//   r.on_token = [](int32_t, std::string_view text) { ...; return true; };  // false cancels
//   r.on_done = [](qrt::Result<qrt::GenerateResult> result, int64_t prompt_tokens) { ... };
//   auto id = (*engine)->submit(std::move(r));
//
// Callbacks run on the engine's thread and must not block it for long. Greedy results equal Session::generate's
// (the batched linear layers sum each row in its own order); a request's output does not depend on what else runs.
// A tensor-parallel model is served by all its ranks: the ranks of an in-process group step together on the
// group's threads; under an MPI launch rank 0 runs the engine and every other rank calls Engine::follow, which
// applies rank 0's steps until rank 0's engine is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qrt/runtime.hpp"

namespace qrt {

struct EngineOptions {
  int max_running = 8;          // requests decoded together
  int max_waiting = 64;         // requests queued beyond the running ones; submit() refuses more
  int64_t context_length = 0;   // the most tokens of one request (prompt and output); 0 = the model's default
  // Memory of the KV cache pool shared by all requests (on each rank of a split model). 0: kv_cache_fraction of the
  // free memory when that is set, else room for max_running full contexts, at most half the free memory.
  uint64_t kv_cache_bytes = 0;
  // The share of the memory free when the engine starts (device memory on CUDA, available RAM on the CPU; the
  // smallest over this process's ranks) that the pool takes, after setting aside the block tables, attention
  // workspaces and pass scratch the engine will also allocate. The rest is headroom for the backend's own buffers
  // and other users of the device. In (0, 1]; 0 = not used.
  double kv_cache_fraction = 0.0;
  int block_size = 16;          // tokens per KV cache block (a power of two)
  int64_t prompt_chunk = 0;     // prompt tokens run per step, over all prompts; 0 = the model's prompt_batch
};

struct EngineRequest {
  std::string prompt;                 // text to continue (PromptOptions defaults), used when messages is empty
  std::vector<ChatMessage> messages;  // a conversation, rendered with the model's chat template
  GenerateOptions options;            // as Session::generate takes them (on_logprobs is called too)
  // After the prompt has run, before the first token: the prompt's length in tokens.
  std::function<void(int64_t prompt_tokens)> on_started;
  TokenCallback on_token;  // as Session::generate's callback; returning false cancels the request
  // Exactly once: the generation (also after a cancel: stop reason kCallback), or why the request failed (its prompt
  // does not fit the context: kOutOfRange; the model has no chat template; the engine was destroyed first).
  std::function<void(Result<GenerateResult> result)> on_done;
};

struct EngineCounts {
  int running = 0;
  int waiting = 0;
  int sequences = 0;            // max_running
  uint64_t steps = 0;           // passes that decoded tokens
  uint64_t passes = 0;          // model passes: decode tokens and prompt chunks run together in one
  uint64_t prompt_tokens = 0;   // of admitted requests (each counted once)
  uint64_t reused_prompt_tokens = 0;  // prompt tokens taken from cached blocks instead of computed
  uint64_t generated_tokens = 0;
  uint64_t finished = 0;        // requests whose on_done has run
  uint64_t preemptions = 0;     // requests sent back to the queue to free KV blocks
  int largest_batch = 0;        // most requests one step decoded
  uint64_t kv_cache_bytes = 0;  // the pool
  int64_t kv_blocks = 0;        // in the pool
  int64_t kv_blocks_used = 0;   // held by running requests
  int64_t kv_blocks_cached = 0; // free, holding a prefix a later request may reuse
  int kv_block_size = 0;        // tokens per block
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> start(const Model& model, const EngineOptions& options = {});
  // Ranks 1.. of an MPI launch: mirrors rank 0's engine (its pools, passes and all-reduces) until rank 0 destroys
  // it. Returns an error when the model is not one rank of an MPI launch, or rank 0 failed to start.
  static Status follow(const Model& model);
  // Stops the thread; requests still waiting or running end with an error.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its id; kOutOfRange when max_waiting requests already wait.
  Result<uint64_t> submit(EngineRequest request);
  // Stops a request at its next step (on_done reports stop reason kCallback), or drops it from the queue.
  void cancel(uint64_t id);
  EngineCounts counts() const;
  int64_t context_length() const;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qrt
