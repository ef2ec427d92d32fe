// The one decoder-only transformer. Every supported architecture is this code driven by ModelConfig flags:
//
//   x = token_embd[tokens]                                   x: [n, hidden]
//   per layer:
//     h = rms_norm(x, attn_norm)
//     q, k, v = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)       q: [n, heads*hd], k/v: [n, kv_heads*hd]
//     q, k = rms_norm per head (qk_norm)                     on [n*heads, hd]
//     q, k = rope(q, k, positions)
//     append k, v to the KV cache; a = attention(q, cache)  a: [n, heads*hd]
//     x += a·Woᵀ (+bo)
//     h = rms_norm(x, ffn_norm)
//     dense: x += (silu(h·Wgᵀ) * h·Wuᵀ)·Wdᵀ
//     MoE:   route = top_k(softmax(h·Wrᵀ)); x += sum_s w_s * expert_{id_s}(h) (+ shared experts' dense MLP)
//   DeepSeek's latent attention replaces q/k/v with a low-rank q and a cache of [RoPE key | latent] rows
//   (transformer_mla.cpp, models/mla_weights.hpp); its first layers keep a dense MLP.
//   logits = rms_norm(x, output_norm)·Woutᵀ                  (Wout = token_embd when "output" is absent)
//
// Weights are uploaded once in Transformer::create; a Sequence holds the KV cache and scratch buffers on the
// device. A forward pass issues only device ops, uploads the token ids and positions, and downloads the logits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "loader/quant_tensor.hpp"
#include "models/kv_blocks.hpp"
#include "loader/tensor_slice.hpp"
#include "models/model_config.hpp"
#include "models/rope.hpp"
#include "backend/backend.hpp"

namespace qrt {

// This rank's share of a tensor-parallel model: create() uploads only this rank's slices (column-parallel q/k/v,
// gate/up; row-parallel o, down; expert stacks split on their intermediate width or replicated) and the layers
// run on local sizes, meeting in the backend's all_reduce_sum. Must match the backend's tp_rank/tp_world_size.
struct TensorParallel {
  int rank = 0;
  int world = 1;
};

struct TransformerOptions {
  TensorParallel tp;
  // Decode steps (one token) run as one captured graph per sequence on a backend that supports graphs
  // (Backend::capture): the first step captures, later steps upload the token, its position, slot and key count
  // and launch. Off: every op is issued one by one (the comparison the graph tests make).
  bool graphs = true;
  // The KV cache element type of every sequence; empty: the backend's preferred_kv_type() (f16 on CUDA, f32 on the
  // CPU).
  std::optional<KvType> kv_type;
  // Called after each tensor is uploaded (its slice, on a split model) with the bytes of the whole tensor as the
  // file stores it: a loader's progress.
  std::function<void(uint64_t bytes)> on_tensor_loaded;
  // The longest context the model will serve; 0: the config's context_length. LongRoPE (Phi-3) uses its long
  // factors when this exceeds the original context, as llama.cpp decides by its context size.
  int64_t context_length = 0;
};

class Transformer;

// A paged KV cache shared by many sequences (Transformer::new_kv_pool): K and V of every layer for `blocks` blocks
// of `block_size` tokens, and each row's position. A paged sequence holds blocks as it grows, returns them when it
// is reset or destroyed, and starts from blocks that already hold its first tokens where the pool has them
// (Transformer::reuse_prefix; models/kv_blocks.hpp). Must outlive its sequences; must not outlive the Transformer.
class KvPool {
 public:
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;
  int64_t blocks() const { return blocks_.blocks(); }
  int block_size() const { return blocks_.block_size(); }
  int64_t held_blocks() const { return blocks_.held_blocks(); }
  int64_t free_blocks() const { return blocks_.free_blocks(); }
  int64_t cached_blocks() const { return blocks_.cached_blocks(); }
  uint64_t bytes() const { return k_.buffer().bytes + v_.buffer().bytes + positions_.buffer().bytes; }
  // Prompt tokens taken from cached blocks instead of being computed (reuse_prefix), since the pool was made.
  uint64_t reused_tokens() const { return reused_tokens_; }

 private:
  friend class Transformer;
  friend class Sequence;
  KvPool(int64_t blocks, int block_size, uint64_t serial) : blocks_(blocks, block_size), serial_(serial) {}
  KvBlockAllocator blocks_;
  uint64_t serial_;  // unique per pool made in this process: what a captured step was recorded against
  ScopedBuffer k_, v_;     // [layers, blocks * block_size, kv_heads * head_dim]
  ScopedBuffer positions_;  // [blocks * block_size] int32
  uint64_t reused_tokens_ = 0;
};

// One token stream's state on the device: KV cache for every layer (its own, or blocks of a KvPool), the positions
// of its slots and scratch buffers sized for the largest batch seen so far. Must not outlive the Transformer (and
// its Backend), nor its pool.
class Sequence {
 public:
  ~Sequence() { release_blocks(); }
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t length() const { return length_; }      // tokens in the KV cache
  int64_t capacity() const { return capacity_; }  // the most tokens it can hold
  bool paged() const { return pool_ != nullptr; }
  int64_t held_blocks() const { return static_cast<int64_t>(blocks_.size()); }  // of its pool
  // The device memory this sequence owns: its KV cache (K and V of every layer for `capacity` tokens, and the
  // slots' positions; fixed when it is created) and its scratch (sized for the largest batch so far, with the
  // attention workspace of one-token steps).
  // A paged sequence: the share of its pool's memory in the blocks it holds.
  uint64_t kv_cache_bytes() const {
    if (pool_ != nullptr)
      return pool_->bytes() / static_cast<uint64_t>(pool_->blocks()) * static_cast<uint64_t>(blocks_.size());
    return k_cache_.buffer().bytes + v_cache_.buffer().bytes + positions_.buffer().bytes;
  }
  uint64_t scratch_bytes() const {
    uint64_t n = attention_workspace_.buffer().bytes;
    for (const ScopedBuffer& b : scratch_) n += b.buffer().bytes;
    return n;
  }
  // Forgets every cached token (a paged sequence returns its blocks to the pool; otherwise the memory is kept).
  void reset() {
    release_blocks();
    length_ = 0;
    has_last_logits_ = false;
  }

 private:
  friend class Transformer;
  Sequence() = default;
  void release_blocks() {
    if (pool_ == nullptr) return;
    for (int32_t b : blocks_) pool_->blocks_.release(b);
    blocks_.clear();
    block_hashes_.clear();
    tokens_.clear();
    table_dirty_ = true;
    prefix_cacheable_ = true;
  }

  int64_t length_ = 0;
  int64_t capacity_ = 0;
  bool has_last_logits_ = false;  // the logits scratch holds the last token's logits (forward_keep_logits)
  ScopedBuffer k_cache_, v_cache_;  // [layers, capacity, kv_heads * head_dim]
  ScopedBuffer positions_;          // [capacity] int32
  ScopedBuffer attention_workspace_;  // for one-token steps (Backend::attention_workspace_bytes), may be empty
  int64_t scratch_tokens_ = 0;      // rows the scratch buffers hold
  std::vector<ScopedBuffer> scratch_;
  // Paged: the pool, the blocks held (slot j in blocks_[j / block_size]), their table on the device
  // ([capacity / block_size] int32, uploaded before a pass when it changed), the chain hashes of the full blocks
  // already offered to the prefix cache, and the tokens in the cache (to hash the blocks as they fill).
  KvPool* pool_ = nullptr;
  std::vector<int32_t> blocks_;
  ScopedBuffer block_table_;
  bool table_dirty_ = true;
  std::vector<uint64_t> block_hashes_;
  std::vector<int32_t> tokens_;
  bool prefix_cacheable_ = true;  // cleared by a pass at positions other than its slots
  // The one-token step captured over this sequence's buffers (declared last: destroyed before the buffers).
  std::unique_ptr<BackendGraph> decode_graph_;
};

// Scratch buffers of passes that do not use a sequence's own (Transformer::step_keep_logits, decode_batch),
// sized for the largest pass so far: one set serves every sequence of a scheduler. Must not outlive the Transformer
// (and its Backend).
class DecodeBatch {
 public:
  DecodeBatch() = default;
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;
  uint64_t scratch_bytes() const {
    uint64_t n = attention_tables_.buffer().bytes + attention_workspace_.buffer().bytes;
    for (const ScopedBuffer& b : scratch_) n += b.buffer().bytes;
    return n;
  }
  // Decode steps captured so far (one per batch size and table width in use, again after a buffer grew) and steps
  // launched from them.
  uint64_t step_captures() const { return step_captures_; }
  uint64_t graph_steps() const { return graph_steps_; }

 private:
  friend class Transformer;
  int64_t scratch_tokens_ = 0;
  std::vector<ScopedBuffer> scratch_;
  // The block tables of a step's decode rows side by side, and the workspace of their one attention op
  // (Backend::attention_batch); both grow with the largest step so far.
  ScopedBuffer attention_tables_;
  ScopedBuffer attention_workspace_;
  int64_t logits_rows_ = 0;  // rows of the last decode step's logits still in the scratch (0: none)
  // A decode step of `items` one-token sequences of `pool` over tables `table_blocks` wide, captured over this
  // batch's buffers (cleared whenever one of them is reallocated), replayed by one launch. Declared last: destroyed
  // before the buffers.
  struct StepGraph {
    int64_t items = 0;
    int64_t table_blocks = 0;
    uint64_t pool = 0;  // KvPool::serial_ (an address could be a later pool's)
    std::unique_ptr<BackendGraph> graph;
  };
  uint64_t graph_steps_ = 0, step_captures_ = 0;
  std::vector<StepGraph> graphs_;
};

// KV cache bytes per token of a model with `config` split among `tp_world` ranks (each rank's share): K and V of
// every layer in `kv_type` plus the slot's position. What a sequence of `capacity` tokens owns is capacity times
// this.
uint64_t kv_cache_bytes_per_token(const ModelConfig& config, int tp_world = 1, KvType kv_type = KvType::kF32);

// What Transformer::reuse_prefix would do for a sequence's first tokens, without doing it (plan_prefix): the tokens
// its cached blocks hold, how many of those blocks nobody holds now (taking them lowers the pool's free count), and
// the blocks the rest of the tokens still need.
struct PrefixPlan {
  int64_t reused_tokens = 0;
  int64_t blocks_taken_from_free = 0;
  int64_t new_blocks = 0;
  // Whether the pool can hold all the tokens now.
  bool fits(const KvPool& pool) const { return blocks_taken_from_free + new_blocks <= pool.free_blocks(); }
};

enum class LogitsFor {
  kLast,  // logits of the last token: [vocab]
  kAll,   // logits of every token of the call: [tokens, vocab]
};

class Transformer {
 public:
  // Uploads the weights named in canonical form (models/tensor_names.hpp) and checks every shape against the
  // config. Tensors the config does not use are an error (a config that does not describe the weights).
  static Result<std::unique_ptr<Transformer>> create(Backend& backend, const ModelConfig& config,
                                                     const TensorTable& canonical_tensors,
                                                     const TransformerOptions& options = {});
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  KvType kv_type() const { return kv_type_; }  // of every sequence's cache
  // Device operations (kernels, copies) in the sequence's captured one-token step, which the host starts with one
  // graph launch per token; 0 before the first captured step or without graphs.
  uint64_t decode_graph_operations(const Sequence& seq) const {
    return seq.decode_graph_ ? seq.decode_graph_->operations() : 0;
  }

  // A sequence able to hold `capacity` tokens.
  Result<std::unique_ptr<Sequence>> new_sequence(int64_t capacity);

  // Paged KV cache: a pool of `blocks` blocks of `block_size` tokens (a power of two), and sequences of up to
  // `capacity` tokens that take blocks from it as they grow. A pass that needs more blocks than the pool has free
  // fails with kOutOfRange before running (blocks_needed says how many it will take).
  Result<std::unique_ptr<KvPool>> new_kv_pool(int64_t blocks, int block_size);
  Result<std::unique_ptr<Sequence>> new_sequence(KvPool& pool, int64_t capacity);
  // Device memory that `sequences` paged sequences of `capacity` tokens (block tables, attention workspaces) and
  // the scratch of passes of up to `pass_tokens` tokens (a DecodeBatch) take besides the pool: what a scheduler
  // sets aside before giving the rest of the free memory to a pool.
  uint64_t paged_overhead_bytes(int64_t sequences, int64_t capacity, int block_size, int64_t pass_tokens) const;
  // Blocks a pass of `tokens` more tokens takes from the pool (0 for a sequence with its own cache).
  int64_t blocks_needed(const Sequence& seq, int64_t tokens) const;
  // An empty paged sequence about to run `tokens`: takes the pool's cached blocks that hold its longest prefix of
  // whole blocks (but never the last token, whose logits the caller needs) and returns how many tokens they hold;
  // the sequence's length is then that count, and the caller runs the rest.
  int64_t reuse_prefix(Sequence& seq, std::span<const int32_t> tokens);
  PrefixPlan plan_prefix(const Sequence& seq, std::span<const int32_t> tokens) const;
  // Takes the blocks the next `tokens` tokens of a paged sequence will need now, so that the passes that run them
  // cannot find the pool full (a scheduler admitting a prompt it runs in chunks). kOutOfRange when the pool has too
  // few free blocks or the tokens exceed the capacity; nothing changes then.
  Status reserve_blocks(Sequence& seq, int64_t tokens);

  // Runs `tokens` through the model at `positions` (same length), appending them to the sequence's cache
  // slots [length, length + n). A key is visible to a query when its position is not greater (and within the
  // sliding window); the usual caller passes positions length, length + 1, .... Writes the logits to *logits.
  // On error the sequence keeps its previous length.
  Status forward(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions, LogitsFor which,
                 std::vector<float>* logits);
  // The same at positions length, length + 1, ....
  Status forward(Sequence& seq, std::span<const int32_t> tokens, LogitsFor which, std::vector<float>* logits);

  // Decoding without copying logits back: the forward pass leaves the last token's logits on the device, in the
  // sequence; sample_last turns them into one id through the backend's sample op and copies back only that id.
  // A backend without the op reports unsupported; download_last_logits then gives the logits to sample on the
  // host. Both need a forward_keep_logits since the sequence was created or reset.
  Status forward_keep_logits(Sequence& seq, std::span<const int32_t> tokens);

  // One decode step of several sequences together: tokens[i] continues seqs[i] at its next position (the sequences
  // distinct, each with room for one more token). Every linear layer runs on all rows at once, so the weights are
  // read once per step for the whole batch; RoPE, the KV write and attention run per sequence on its own cache.
  // Writes the logits [n, vocab] (row i for seqs[i]) to *logits. Each sequence grows by one token; on error none
  // changes. The same numbers as one forward per sequence, up to the summation order of the batched GEMMs.
  Status decode_batch(DecodeBatch& batch, std::span<Sequence* const> seqs, std::span<const int32_t> tokens,
                      std::vector<float>* logits);
  // The same step leaving the logits on the device, in the batch's scratch until its next pass: sample_batch_rows
  // turns rows of them into ids with the backend's sample op (kUnsupported without one), copying back one id per
  // row instead of a row of logits; download_batch_row copies one row back.
  Status decode_batch_keep_logits(DecodeBatch& batch, std::span<Sequence* const> seqs,
                                  std::span<const int32_t> tokens);
  // One pass of several sequences, each continuing with its own tokens at its next positions (one decode token, or a
  // chunk of its prompt): every linear layer on all the rows at once, RoPE, the KV write and attention per sequence
  // on its own cache. The logits of each span's last token stay on the device, row i for spans[i], like
  // decode_batch_keep_logits's. On error no sequence changes.
  struct StepSpan {
    Sequence* seq;
    std::span<const int32_t> tokens;
  };
  Status step_keep_logits(DecodeBatch& batch, std::span<const StepSpan> spans);
  // Rows [first, first + step.u01.size()) of the kept logits, sampled with the step's shared parameters.
  Status sample_batch_rows(DecodeBatch& batch, int64_t first, const SampleStep& step, std::span<int32_t> ids);
  Status download_batch_row(DecodeBatch& batch, int64_t row, std::vector<float>* logits);
  Status sample_last(Sequence& seq, const SampleStep& step, int32_t* id);
  Status download_last_logits(Sequence& seq, std::vector<float>* logits);

 private:
  struct Layer;
  Transformer(Backend& backend, const ModelConfig& config);
  Status load(const TensorTable& tensors, const TransformerOptions& options);
  // Rows [first_row, first_row + rows) of a pass that belong to one sequence's cache.
  struct CacheRows {
    Sequence* seq;
    int64_t first_row;
    int64_t rows;
  };
  Status ensure_scratch(Sequence& seq, int64_t tokens);
  // A pass's arguments against the sequence (room, ids, positions), before anything changes.
  Status check_pass(const Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions) const;
  // The pass's slots prepared and its token ids, positions, cache rows and key count uploaded to scratch[kStep];
  // *at_slots: every position equals its slot.
  Status stage_pass(std::vector<ScopedBuffer>& scratch, Sequence& seq, std::span<const int32_t> tokens,
                    std::span<const int32_t> positions, bool* at_slots);
  // A paged sequence before a pass of `tokens` tokens: blocks for them, the table uploaded when it changed, and the
  // pool rows of the pass's slots (appended to *rows). Nothing for a sequence with its own cache (rows = slots).
  Status prepare_slots(Sequence& seq, int64_t tokens, std::vector<int32_t>* rows);
  // After a pass: the tokens recorded, and blocks that became full offered to the prefix cache.
  void record_tokens(Sequence& seq, std::span<const int32_t> tokens, bool at_slots);
  KvLayerView cache_view(Sequence& seq, int layer_index) const;
  // The pool's cached blocks holding the longest prefix of whole blocks of `tokens` (never the last token) of an
  // empty paged sequence, with their chain hashes.
  std::vector<std::pair<int32_t, uint64_t>> cached_prefix(const Sequence& seq, std::span<const int32_t> tokens) const;
  Status ensure_scratch_buffers(std::vector<ScopedBuffer>& scratch, int64_t& have, int64_t tokens);
  // Elements per token of each scratch buffer (transformer_scratch.hpp), all 4 bytes wide.
  std::vector<int64_t> scratch_per_token() const;
  // The forward pass up to the logits, left on the device: [rows, vocab], rows = 1 for kLast, n for kAll.
  Status run_forward(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                     LogitsFor which, F32View* logits);
  // The leading groups of a step that are one token each of sequences of one pool: rows [0, items), whose
  // attention runs as one Backend::attention_batch over their block tables ([items, blocks], device values).
  struct DecodeRows {
    int64_t items = 0;
    ConstI32View tables;
    DeviceBuffer workspace;
  };
  // The device ops of a pass whose token ids, positions, slots and key counts are already in the step scratch;
  // `groups` says which rows go to which sequence's cache. The logits are those of rows [first_row, tokens), or
  // with `gather`, of the rows it names (device values).
  Status issue_forward(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int64_t tokens,
                       int64_t first_row, F32View logits, ConstI32View gather, const DecodeRows& decode);
  Status run_layer(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index,
                   int64_t tokens, F32View x, const DecodeRows& decode);
  // DecodeRows for a step over `groups` (rows of the step scratch), with the tables uploaded to the batch's
  // buffers: none (items = 0) unless at least two leading groups qualify. Table widths are rounded up to a power
  // of two, so that a captured step serves sequences as they grow.
  Result<DecodeRows> stage_decode_rows(DecodeBatch& batch, std::span<const CacheRows> groups);
  // A step whose rows are all one-token decode rows of one pool: its captured graph (captured on first use when the
  // backend supports graphs), launched; false in *ran when it must run op by op.
  Status launch_step_graph(DecodeBatch& batch, std::span<const CacheRows> groups, int64_t n, F32View logits,
                           const DecodeRows& decode, bool* ran);
  // Layer `layer_index`'s attention: its window (all layers, or the windowed ones of a pattern), the q·k scale and
  // soft-capping. The attention workspaces do not depend on these, so layer 0's size them for every layer.
  AttentionParams attention_params(int layer_index) const;
  // gate = act(gate) * up with the config's activation.
  Status gated_activation(F32View gate, ConstF32View up);
  // RoPE of q and k, their KV write and attention of every group of rows, into attn (the per-token part of
  // run_layer's attention block, for standard and latent attention alike).
  Status attend(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index, int64_t n,
                const DecodeRows& decode, F32View q, F32View k, ConstF32View v, F32View attn);
  // DeepSeek's latent attention of layer `layer_index` (models/mla_weights.hpp), up to the output projection's
  // partial sum in proj (transformer_mla.cpp).
  Status mla_attention(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index,
                       int64_t n, const DecodeRows& decode, F32View proj);
  // The MLP of an MoE layer (routed experts, and DeepSeek's shared experts) into proj: this rank's partial sum,
  // which run_layer all-reduces unless the experts are replicated (transformer_moe.cpp).
  Status moe_mlp(std::vector<ScopedBuffer>& scratch, int layer_index, int64_t n, F32View proj);
  // Latent attention: the cache holds one row of [RoPE key | latent] per token whose values are the keys, so no V
  // cache is kept (KvLayerView's v is k).
  bool values_are_keys() const { return config_.kv_lora_rank > 0; }

  Backend& backend_;
  ModelConfig config_;
  // Local (this rank's) sizes.
  int heads_ = 0, kv_heads_ = 0, head_dim_ = 0, ffn_ = 0, expert_ffn_ = 0;
  WeightHandle token_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  std::vector<WeightHandle> uploaded_;  // every handle to free
  RopeTable rope_;
  ScopedBuffer rope_inv_freq_;  // [rot_dim / 2]
  RopeTable rope_local_;        // the windowed layers' (ModelConfig::rope_local_theta), or empty
  ScopedBuffer rope_local_inv_freq_;
  std::vector<SlicedTensor> fused_parts_;  // bytes of split fused tensors that had to be gathered (none for rows)
  bool graphs_ = true;          // TransformerOptions::graphs, cleared when the backend cannot capture a step
  KvType kv_type_ = KvType::kF32;
};

}  // namespace qrt
