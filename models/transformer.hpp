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
//     MoE:   route = top_k(softmax(h·Wrᵀ)); x += sum_s w_s * expert_{id_s}(h)
//   logits = rms_norm(x, output_norm)·Woutᵀ                  (Wout = token_embd when "output" is absent)
//
// Weights are uploaded once in Transformer::create; a Sequence holds the KV cache and scratch buffers on the
// device. A forward pass issues only device ops, uploads the token ids and positions, and downloads the logits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "loader/quant_tensor.hpp"
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
};

class Transformer;

// One token stream's state on the device: KV cache for every layer, the positions of its slots and scratch
// buffers sized for the largest batch seen so far. Must not outlive the Transformer (and its Backend).
class Sequence {
 public:
  ~Sequence() = default;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t length() const { return length_; }      // tokens in the KV cache
  int64_t capacity() const { return capacity_; }  // the most tokens it can hold
  // The device memory this sequence owns: its KV cache (K and V of every layer for `capacity` tokens, and the
  // slots' positions; fixed when it is created) and its scratch (sized for the largest batch so far, with the
  // attention workspace of one-token steps).
  uint64_t kv_cache_bytes() const {
    return k_cache_.buffer().bytes + v_cache_.buffer().bytes + positions_.buffer().bytes;
  }
  uint64_t scratch_bytes() const {
    uint64_t n = attention_workspace_.buffer().bytes;
    for (const ScopedBuffer& b : scratch_) n += b.buffer().bytes;
    return n;
  }
  // Forgets every cached token (the memory is kept).
  void reset() {
    length_ = 0;
    has_last_logits_ = false;
  }

 private:
  friend class Transformer;
  Sequence() = default;

  int64_t length_ = 0;
  int64_t capacity_ = 0;
  bool has_last_logits_ = false;  // the logits scratch holds the last token's logits (forward_keep_logits)
  ScopedBuffer k_cache_, v_cache_;  // [layers, capacity, kv_heads * head_dim]
  ScopedBuffer positions_;          // [capacity] int32
  ScopedBuffer attention_workspace_;  // for one-token steps (Backend::attention_workspace_bytes), may be empty
  int64_t scratch_tokens_ = 0;      // rows the scratch buffers hold
  std::vector<ScopedBuffer> scratch_;
  // The one-token step captured over this sequence's buffers (declared last: destroyed before the buffers).
  std::unique_ptr<BackendGraph> decode_graph_;
};

// Scratch buffers of decode steps that run several sequences at once (Transformer::decode_batch), sized for the
// largest batch so far. Must not outlive the Transformer (and its Backend).
class DecodeBatch {
 public:
  DecodeBatch() = default;
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;
  uint64_t scratch_bytes() const {
    uint64_t n = 0;
    for (const ScopedBuffer& b : scratch_) n += b.buffer().bytes;
    return n;
  }

 private:
  friend class Transformer;
  int64_t scratch_tokens_ = 0;
  std::vector<ScopedBuffer> scratch_;
};

// KV cache bytes per token of a model with `config` split among `tp_world` ranks (each rank's share): K and V of
// every layer in `kv_type` plus the slot's position. What a sequence of `capacity` tokens owns is capacity times
// this.
uint64_t kv_cache_bytes_per_token(const ModelConfig& config, int tp_world = 1, KvType kv_type = KvType::kF32);

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
  Status ensure_scratch_buffers(std::vector<ScopedBuffer>& scratch, int64_t& have, int64_t tokens);
  // The forward pass up to the logits, left on the device: [rows, vocab], rows = 1 for kLast, n for kAll.
  Status run_forward(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                     LogitsFor which, F32View* logits);
  // The device ops of a pass whose token ids, positions, slots and key counts are already in the step scratch;
  // `groups` says which rows go to which sequence's cache.
  Status issue_forward(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int64_t tokens,
                       int64_t first_row, F32View logits);
  Status run_layer(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index,
                   int64_t tokens, F32View x);
  AttentionParams attention_params() const;

  Backend& backend_;
  ModelConfig config_;
  // Local (this rank's) sizes.
  int heads_ = 0, kv_heads_ = 0, head_dim_ = 0, ffn_ = 0, expert_ffn_ = 0;
  WeightHandle token_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  std::vector<WeightHandle> uploaded_;  // every handle to free
  RopeTable rope_;
  ScopedBuffer rope_inv_freq_;  // [rot_dim / 2]
  bool graphs_ = true;          // TransformerOptions::graphs, cleared when the backend cannot capture a step
  KvType kv_type_ = KvType::kF32;
};

}  // namespace qrt
