// The device interface the transformer runs on: device-resident buffers, weights uploaded once in their packed
// form, and a small list of ops. Implemented by the CPU reference (cpu_backend.hpp) and the CUDA backend.
//
// Execution model (written for a GPU):
//  * Ops are issued in call order on the backend's one stream. They may run asynchronously: a returned ok Status
//    means the arguments were valid and the op was issued; faults inside a kernel surface at the next
//    download() or synchronize(). The CPU backend runs each op before returning.
//  * Every pointer in a DeviceView is device memory (host memory for the CPU backend) obtained from allocate();
//    views may point anywhere inside an allocation. The host never reads device memory except through
//    download(), so a forward pass has no host round trip until the logits come back.
//  * Shapes are checked against each other in every op and a mismatch is an error, never a crash. Values that
//    only the device sees (token ids, router ids) are checked by the CPU backend; callers validate them on the
//    host before upload, since a GPU kernel cannot report them.
//  * Elementwise and row-wise ops (rms_norm, rope, silu_mul, add) accept an output that aliases an input
//    exactly; other ops need distinct outputs.
//
// Tensor parallelism: a rank may hold a slice of a layer (column-parallel q/k/v/gate/up: fewer output rows;
// row-parallel o/down: fewer input columns). The ops only see the local shapes, so they need no change; the
// partial sums of row-parallel layers go through all_reduce_sum(), which is the identity on a single rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/sampler.hpp"
#include "kernels/moe/moe_routing.hpp"
#include "kernels/rope/rope_layout.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/kv_type.hpp"
#include "qrt/status.hpp"

namespace qrt {

// A row-major [rows, cols] view of device memory. 1-D arrays (positions, token ids) are [n, 1].
template <class T>
struct DeviceView {
  T* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t numel() const { return rows * cols; }
  // Rows [first, first + count): no bounds check here, the ops check the shapes they are given.
  DeviceView row_range(int64_t first, int64_t count) const { return {data + first * cols, count, cols}; }
  // The same memory seen as [new_rows, new_cols]; the caller keeps new_rows * new_cols == numel().
  DeviceView reshaped(int64_t new_rows, int64_t new_cols) const { return {data, new_rows, new_cols}; }
  template <class U = T, class = std::enable_if_t<!std::is_const_v<U>>>
  operator DeviceView<const U>() const {  // NOLINT: a mutable view is usable where a const one is expected
    return {data, rows, cols};
  }
};
using F32View = DeviceView<float>;
using ConstF32View = DeviceView<const float>;
using I32View = DeviceView<int32_t>;
using ConstI32View = DeviceView<const int32_t>;


// One allocation of device memory.
struct DeviceBuffer {
  void* ptr = nullptr;
  uint64_t bytes = 0;
};

// A weight living on the device, in its packed format. 0 is "no weight" (e.g. an absent bias).
struct WeightHandle {
  uint32_t id = 0;
  bool valid() const { return id != 0; }
  bool operator==(const WeightHandle&) const = default;
};

struct WeightInfo {
  quant::FormatId format = quant::FormatId::kF32;
  std::vector<int64_t> shape;  // logical, outermost first: [n], [out, in] or [experts, out, in]
};

// RoPE for one projection. The frequencies are computed once on the host (models/rope.hpp: base, Llama 3 /
// linear / YaRN scaling, GGUF rope_freqs) and uploaded, so the op itself has no scaling logic.
struct RopeParams {
  RopeLayout layout = RopeLayout::kHalfSplit;
  int head_dim = 0;
  int rot_dim = 0;            // rotated dims per head (even, <= head_dim); the rest pass through
  float attn_factor = 1.0f;   // multiplies cos and sin (YaRN)
  ConstF32View inv_freq;      // [rot_dim / 2, 1]: pair i turns by position * inv_freq[i]
};

struct AttentionParams {
  int heads = 0;             // query heads (local to this rank)
  int kv_heads = 0;          // key/value heads; heads % kv_heads == 0
  int head_dim = 0;
  float scale = 0.0f;        // on q·k, usually 1/sqrt(head_dim)
  int sliding_window = 0;    // 0 = full causal attention; else q_pos - k_pos < sliding_window
  float softcap = 0.0f;      // > 0: each score s = scale * q·k becomes softcap * tanh(s / softcap) (Gemma 2)
  const float* sinks = nullptr;  // [heads] backend memory, or null: one more logit per head, value zero (gpt-oss)
  // The cache's values are its keys (KvLayerView's v is k, one KV head: DeepSeek's latent cache), so a backend may
  // read each row once for both.
  bool values_are_keys = false;
};

// One layer's KV cache: slot s holds the key and value rows of the token at position positions[s].
// One of a layer's K or V arrays: [capacity, kv_heads * head_dim] elements of `type` (q8_0: rows of blocks).
struct KvView {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  KvType type = KvType::kF32;

  KvView() = default;
  KvView(void* d, int64_t r, int64_t c, KvType t) : data(d), rows(r), cols(c), type(t) {}
  KvView(F32View v) : data(v.data), rows(v.rows), cols(v.cols), type(KvType::kF32) {}  // NOLINT: an f32 cache
  int64_t numel() const { return rows * cols; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows * kv_row_bytes(type, cols)); }
  // The same memory as [rows, row bytes] bytes, for the range and shape checks.
  DeviceView<uint8_t> byte_view() const { return {static_cast<uint8_t*>(data), rows, kv_row_bytes(type, cols)}; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

struct KvLayerView {
  KvLayerView() = default;
  KvLayerView(KvView k_rows, KvView v_rows, I32View row_positions, DeviceBuffer workspace = {},
              ConstI32View table = {}, int table_block_size = 0)
      : k(k_rows), v(v_rows), positions(row_positions), attention_workspace(workspace), block_table(table),
        block_size(table_block_size) {}
  KvView k;           // [rows, kv_heads * head_dim]
  KvView v;           // [rows, kv_heads * head_dim], the same type as k; or k itself (v.data == k.data): the values
                      // are the keys (DeepSeek's latent cache), and the KV writes store k only
  I32View positions;  // [rows, 1], shared by all layers (kv_write records each row's position)
  // Device memory attention may use over this cache (Backend::attention_workspace_bytes; shared by the layers,
  // which run one after another). Empty: attention does without.
  DeviceBuffer attention_workspace;
  // A paged cache: k, v and positions are a pool shared by many sequences, in blocks of block_size rows (a power of
  // two), and this sequence's slot j is pool row block_table[j / block_size] * block_size + j % block_size. Without
  // a table the rows are the sequence's slots. kv_write takes pool rows (the caller maps the slots); attention reads
  // slots [0, keys) through the table. The entries must be blocks of the pool: the CPU backend reports one that is
  // not, a GPU cannot.
  ConstI32View block_table;  // [blocks, 1]
  int block_size = 0;
  bool paged() const { return block_table.data != nullptr; }
  // The sequence's slots: what attention's key count may reach.
  int64_t slots() const { return paged() ? block_table.rows * block_size : k.rows; }
};

// One decode step of sampling for `rows` sequences that share the parameters. The random draws are made on the
// host (u01[r] = std::generate_canonical<double, 53>(rng of sequence r), what std::uniform_real_distribution
// takes), so the op is deterministic and equals sample_with_uniform (kernels/cpu/sampler.hpp) row by row.
struct SampleStep {
  SamplingParams params;        // the seed is not used
  std::vector<double> u01;      // [rows], each in [0, 1); unused (but required) when temperature is 0
  // The penalties of row r are penalties[penalty_offsets[r] .. penalty_offsets[r + 1]) (count_penalty_tokens of
  // that row's history): distinct tokens inside the vocabulary, counts > 0. Empty offsets: no penalties.
  std::vector<int32_t> penalty_offsets;  // [rows + 1] or empty
  std::vector<PenaltyCount> penalties;
};

// What a backend holds in device memory (host memory for the CPU backend), by owner.
struct MemoryStats {
  uint64_t weight_bytes = 0;           // uploaded weights as stored (packed parts, decoded 1-D tensors)
  uint64_t activation_bytes = 0;       // live allocate() blocks: KV caches and scratch of the sequences
  uint64_t activation_peak_bytes = 0;  // the most held for activations at once (blocks cached for reuse included)
};

// The memory the backend allocates from, as the system reports it now (every process's use counted).
struct MemoryAvailable {
  uint64_t free_bytes = 0;   // what allocate() can still get: device memory free, or the host's available RAM
  uint64_t total_bytes = 0;
};

// A captured sequence of ops (Backend::capture), replayed by Backend::launch. It keeps the device pointers it was
// captured with: the buffers it reads and writes must outlive it.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  // The device operations (kernels, copies, memsets) one launch of the graph runs; 0 when the backend cannot say.
  virtual uint64_t operations() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual MemoryStats memory_stats() const = 0;
  // Free and total memory of what allocate() draws from (cudaMemGetInfo; /proc/meminfo's MemAvailable).
  virtual Result<MemoryAvailable> memory_available() const = 0;

  // ---- memory -------------------------------------------------------------------------------------------
  virtual Result<DeviceBuffer> allocate(uint64_t bytes) = 0;
  // Frees an allocation (waiting for ops that may still use it). A default DeviceBuffer is ignored.
  virtual void deallocate(DeviceBuffer buffer) = 0;
  // Host -> device, ordered after the ops issued before it. The host memory may be reused once this returns.
  virtual Status upload(const void* host, void* device, uint64_t bytes) = 0;
  // Device -> host: waits for every op issued before it, then copies.
  virtual Status download(const void* device, void* host, uint64_t bytes) = 0;
  // Waits for every issued op; reports a deferred device fault.
  virtual Status synchronize() = 0;

  // ---- weights -------------------------------------------------------------------------------------------
  // Copies a tensor's parts to the device unchanged (packed data, scales, biases), after checking the format's
  // shape rules and the part sizes. 1-D tensors (norm weights, biases) may be stored decoded to f32.
  // A 3-D [experts, out, in] tensor is `experts` independently packed [out, in] matrices, one after another in
  // each part: expert e's parts start at e * part_sizes(out, in) (some formats, e.g. HQQ, group across a whole
  // matrix, so a stack is not one [experts * out, in] matrix).
  virtual Result<WeightHandle> upload_weight(const QuantTensor& tensor) = 0;
  virtual Result<WeightInfo> weight_info(WeightHandle weight) const = 0;
  virtual void free_weight(WeightHandle weight) = 0;

  // ---- ops -----------------------------------------------------------------------------------------------
  // out[t] = table[tokens[t]], decoding one row of a possibly quantized table.
  //   table: [vocab, dim]; tokens: [n, 1]; out: [n, dim]
  virtual Status embed(WeightHandle table, ConstI32View tokens, F32View out) = 0;

  // Row-wise RMSNorm: out = x / sqrt(mean(x²) + eps) * weight.  x, out: [rows, dim]; weight: [dim].
  // Per-head q/k norm is the same op on the [tokens * heads, head_dim] view.
  virtual Status rms_norm(ConstF32View x, WeightHandle weight, float eps, F32View out) = 0;

  // y = x · Wᵀ (+ bias).  x: [n, in]; w: [out, in] in any format; bias: [out] or invalid; y: [n, out].
  virtual Status linear(ConstF32View x, WeightHandle w, WeightHandle bias, F32View y) = 0;

  // linear() of each part on the same x (a layer's q, k and v projections, or gate and up). Backends may run the
  // parts as one operation (CUDA: one GEMV launch when the formats agree); the values are those of the separate
  // calls. No y may overlap x or another part's y.
  struct LinearPart {
    WeightHandle w;
    WeightHandle bias;
    F32View y;
  };
  virtual Status linear_same_input(ConstF32View x, std::span<const LinearPart> parts) {
    for (const LinearPart& part : parts) QRT_TRY(linear(x, part.w, part.bias, part.y));
    return ok_status();
  }

  // In-place RoPE.  x: [tokens, heads * head_dim]; positions: [tokens, 1].
  virtual Status rope(F32View x, int heads, ConstI32View positions, const RopeParams& params) = 0;

  // The KV cache element type a model uses on this backend unless told otherwise (ModelOptions::kv_type). Every
  // backend reads and writes every KvType; this is the one that pays on it (f16 on a GPU, where attention reads
  // the cache at memory speed; f32 on the CPU reference).
  virtual KvType preferred_kv_type() const { return KvType::kF32; }

  // Stores row i of k and v in cache slot slots[i] (rounded to the cache's type) and records positions[i] as that slot's position. The slots
  // are device values (so a captured step writes wherever the current length says): callers check on the host
  // that they are distinct and inside the capacity; the CPU backend reports a bad one, a GPU skips it.
  //   k, v: [tokens, kv_heads * head_dim]; slots, positions: [tokens, 1]
  virtual Status kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                          ConstF32View v) = 0;

  // rope(q, heads), rope(k, kv_heads), then kv_write of the rotated k and v, all at `positions`: what every
  // attention layer does before attention. Backends may fuse them; the default runs the three ops.
  virtual Status rope_kv_write(F32View q, F32View k, ConstF32View v, int heads, int kv_heads, ConstI32View positions,
                               const RopeParams& params, const KvLayerView& cache, ConstI32View slots) {
    QRT_TRY(rope(q, heads, positions, params));
    QRT_TRY(rope(k, kv_heads, positions, params));
    return kv_write(cache, slots, positions, k, v);
  }

  // Bytes of KvLayerView::attention_workspace with which attention of `tokens` query rows over a cache of
  // `capacity` slots takes its fastest path (on a GPU, splitting the keys among blocks); 0: it needs none.
  virtual uint64_t attention_workspace_bytes(int64_t tokens, const AttentionParams& params, int64_t capacity) const {
    return 0;
  }

  // Causal attention of the queries over cache slots [0, keys[0]), masked by position (see AttentionParams), through
  // the block table of a paged cache. The key count is read by the device, like the slots of kv_write; it must not
  // exceed cache.slots() (the CPU backend reports it, a GPU clamps it).
  //   q: [tokens, heads * head_dim]; q_positions: [tokens, 1]; keys: [1, 1]; out: [tokens, heads * head_dim]
  virtual Status attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                           const AttentionParams& params, F32View out) = 0;

  // Decode attention of many sequences of one paged pool in one op: query row i (one token of sequence i) attends
  // over that sequence's slots [0, keys[i]) through row i of `tables`, masked by position as in attention(). Of
  // `pool` the k, v and positions arrays, block_size and attention_workspace (attention_batch_workspace_bytes) are
  // used; its block_table is not. The default runs attention() row by row; a GPU does all rows in one launch.
  //   q: [items, heads * head_dim]; q_positions, keys: [items, 1]; tables: [items, table_blocks] (row i: sequence
  //   i's blocks; entries past its keys are not read); out: [items, heads * head_dim]
  virtual Status attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool,
                                 ConstI32View tables, ConstI32View keys, const AttentionParams& params, F32View out);
  // Bytes of the workspace attention_batch takes its fastest path with, for `items` rows over tables of `slots`
  // slots each.
  virtual uint64_t attention_batch_workspace_bytes(int64_t items, const AttentionParams& params, int64_t slots) const {
    return attention_workspace_bytes(1, params, slots);
  }

  // out = silu(gate) * up.  All [n, d].
  virtual Status silu_mul(ConstF32View gate, ConstF32View up, F32View out) = 0;

  // out = gelu_tanh(gate) * up (GeGLU), gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g³))).  All [n, d].
  virtual Status gelu_tanh_mul(ConstF32View gate, ConstF32View up, F32View out) = 0;

  // gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit), out = g sigmoid(alpha g) (u + 1).
  // All [n, d].
  virtual Status swiglu_clamped_mul(ConstF32View gate, ConstF32View up, float alpha, float limit, F32View out) = 0;

  // y[t * top_k + s] += table[ids[t, s]] (gpt-oss's expert biases). y: [tokens * top_k, d]; table: [experts, d];
  // ids: [tokens, top_k], device values inside the table (the CPU backend reports one that is not, a GPU skips it).
  virtual Status add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) = 0;

  // out = s * x (Gemma's embedding scale).  x, out: [n, d]; out may be x.
  virtual Status scale(ConstF32View x, float s, F32View out) = 0;

  // out = cap * tanh(x / cap) (Gemma 2's final logit soft-capping), cap > 0.  x, out: [n, d]; out may be x.
  virtual Status softcap(ConstF32View x, float cap, F32View out) = 0;

  // out = a + b (the residual add).  All [n, d].
  virtual Status add(ConstF32View a, ConstF32View b, F32View out) = 0;

  // out[i] = [a[i] | b[i]]: rows side by side.  a: [n, da]; b: [n, db]; out: [n, da + db], overlapping neither.
  virtual Status concat_cols(ConstF32View a, ConstF32View b, F32View out) = 0;

  // out[i] = x[rows[i]]: the rows of a pass whose logits are wanted, gathered before the output head. The row
  // indices are device values (each inside [0, x.rows): the CPU backend reports one that is not, a GPU leaves that
  // output row unwritten).  x: [n, d]; rows: [k, 1]; out: [k, d], not overlapping x.
  virtual Status gather_rows(ConstF32View x, ConstI32View rows, F32View out) = 0;

  // The residual add and the RMSNorm that always follows it: x += delta, then out = rms_norm(x, weight, eps).
  // x, delta, out: [rows, dim]. Backends may fuse the two; the default runs them as two ops, and a fused version
  // must give the same values.
  virtual Status add_rms_norm(F32View x, ConstF32View delta, WeightHandle weight, float eps, F32View out) {
    QRT_TRY(add(x, delta, x));
    return rms_norm(x, weight, eps, out);
  }

  // Router: softmax over each row of logits, the top_k experts (ties to the lower id), optionally renormalized
  // to sum to 1.  logits: [tokens, experts]; ids: [tokens, top_k] (int32); weights: [tokens, top_k].
  virtual Status moe_route(ConstF32View logits, bool renormalize, I32View ids, F32View weights) = 0;

  // DeepSeek's router (MoeRouting), in double like moe_route: scores s = softmax or sigmoid of each row; choice
  // scores c = s + bias; with groups > 1 the experts form that many equal groups, each scored by its best c (or the
  // sum of its two best), and only the groups_used best groups (ties to the lower group) take part; the top_k
  // largest c among those (ties to the lower id) are chosen, with weights s, renormalized to sum 1 when asked, then
  // multiplied by scale. A NaN choice score is never chosen; a row with too few others gets ids -1, weights NaN.
  virtual Status moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids,
                                   F32View weights) = 0;

  // Per-slot expert projection, reading only the selected experts of a stacked weight:
  //   y[t * top_k + s] = x[row] · W[ids[t, s]]ᵀ, row = t when x has one row per token (shared input),
  //   row = t * top_k + s when x has one row per slot.
  //   w: [experts, out, in]; ids: [tokens, top_k]; x: [tokens, in] or [tokens * top_k, in];
  //   y: [tokens * top_k, out]
  virtual Status linear_experts(ConstF32View x, WeightHandle w, ConstI32View ids, F32View y) = 0;

  // linear_experts() of each stack on the same x and ids (a layer's gate and up experts). Backends may run them as one
  // operation (CUDA: one launch for one token when the stacks agree in format and shape); the values are those of the
  // separate calls. No y may overlap x or another stack's y.
  struct ExpertPart {
    WeightHandle w;
    F32View y;
  };
  virtual Status linear_experts_same_input(ConstF32View x, std::span<const ExpertPart> parts, ConstI32View ids) {
    for (const ExpertPart& part : parts) QRT_TRY(linear_experts(x, part.w, ids, part.y));
    return ok_status();
  }

  // out[t] = sum_s weights[t, s] * y[t * top_k + s].  y: [tokens * top_k, d]; weights: [tokens, top_k];
  // out: [tokens, d].
  virtual Status moe_combine(ConstF32View y, ConstF32View weights, F32View out) = 0;

  // ids[r] = index of the largest value in row r of logits (the lowest index among equal maxima; NaN never wins),
  // so that greedy decoding copies back one id per row instead of a row of logits.
  //   logits: [rows, vocab]; ids: [rows, 1] (int32). A backend without a device argmax reports unsupported.
  virtual Status argmax(ConstF32View logits, I32View ids) {
    return unsupported(name() + ": argmax is not implemented by this backend");
  }

  // ids[r] = sample_with_uniform(penalized row r of logits, step.params, step.u01[r]): penalties, then greedy or
  // top-k / softmax / top-p / min-p and the given draw, so decode copies back one id per row.
  //   logits: [rows, vocab] (not modified); ids: [rows, 1] (int32). Unsupported unless the backend overrides it.
  virtual bool supports_sample() const { return false; }  // whether sample() is implemented
  virtual Status sample(ConstF32View logits, const SampleStep& step, I32View ids) {
    return unsupported(name() + ": sample is not implemented by this backend");
  }

  // ---- graphs -------------------------------------------------------------------------------------------
  // Records the ops that `issue` makes into a graph instead of running them, so that a decode step costs the
  // host one launch. Nothing runs during capture; `issue` must not allocate, upload or download, and every value
  // that changes between replays (token ids, positions, slots, key counts) must be read by the ops from device
  // memory. Unsupported unless the backend overrides it (the caller then issues the ops one by one).
  virtual bool supports_graphs() const { return false; }
  virtual Result<std::unique_ptr<BackendGraph>> capture(const std::function<Status()>& issue) {
    return unsupported(name() + ": graphs are not implemented by this backend");
  }
  // Runs a graph captured by this backend, in order with the other ops.
  virtual Status launch(const BackendGraph& graph) {
    return unsupported(name() + ": graphs are not implemented by this backend");
  }

  // Sums x across tensor-parallel ranks in place (after row-parallel o and down projections). The identity on
  // one rank; a backend with a communicator overrides it.
  virtual Status all_reduce_sum(F32View x) { return ok_status(); }
  virtual int tp_rank() const { return 0; }
  virtual int tp_world_size() const { return 1; }
};

// Owns one allocation; frees it through its backend.
class ScopedBuffer {
 public:
  ScopedBuffer() = default;
  ScopedBuffer(Backend* backend, DeviceBuffer buffer) : backend_(backend), buffer_(buffer) {}
  ScopedBuffer(ScopedBuffer&& other) noexcept { *this = std::move(other); }
  ScopedBuffer& operator=(ScopedBuffer&& other) noexcept;
  ScopedBuffer(const ScopedBuffer&) = delete;
  ScopedBuffer& operator=(const ScopedBuffer&) = delete;
  ~ScopedBuffer() { reset(); }

  void reset();
  const DeviceBuffer& buffer() const { return buffer_; }
  // The allocation as a typed [rows, cols] view (cols = 1 for 1-D); the caller sized it.
  template <class T>
  DeviceView<T> view(int64_t rows, int64_t cols = 1) const {
    return {static_cast<T*>(buffer_.ptr), rows, cols};
  }

 private:
  Backend* backend_ = nullptr;
  DeviceBuffer buffer_;
};

// allocate() as a ScopedBuffer that frees itself.
Result<ScopedBuffer> allocate_scoped(Backend& backend, uint64_t bytes);

}  // namespace qrt
