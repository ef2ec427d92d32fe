// The CUDA backend: the Backend ops on one NVIDIA GPU, fp32 activations, weights kept in their packed formats.
//
//  * Every op is issued on the context's compute stream and returns once launched; download() and synchronize()
//    wait for it and report deferred device faults. Views are checked on the host against the live allocations
//    (like the CPU backend) before anything is launched, so a shape or indexing bug is an error, not a fault.
//  * Weights: each part (packed data, scales, biases) is copied unchanged from the mapping through pinned staging
//    buffers, alternating between two copy streams; 1-D tensors (norms, biases) are decoded to f32 on the host.
//  * linear: 1-8 rows run the fused dequant-GEMV (kernels/linear/gemv.hpp); more rows dequantize W in row tiles
//    into an fp32 scratch buffer and multiply with cuBLAS SGEMM (fp32 accumulation), then add the bias.
//  * linear_experts reads only the selected experts of a stacked weight (one fused GEMV per slot on the device,
//    no host round trip for the router's ids).
//
// Include only from code built with CUDA (*_cuda.cpp, *.cu); other code uses make_cuda_backend.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_context.hpp"
#include "backend/op_checks.hpp"
#include "backend/pinned_staging.hpp"
#include "kernels/attention/attention_split.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/q8_activations.hpp"

namespace qrt {

class Communicator;

// Time and bytes spent in upload_weight, for the load report.
struct WeightLoadStats {
  uint64_t bytes = 0;     // bytes copied: the parts as stored (packed), or the decoded f32 of 1-D tensors
  double seconds = 0.0;   // wall time inside upload_weight, copies waited for
  uint32_t tensors = 0;
  double gb_per_s() const { return seconds > 0.0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }
};

class CudaBackend final : public Backend {
 public:
  // `comm`: this rank's tensor-parallel communicator (not owned; it must outlive the backend), an NCCL
  // communicator on the same device, or null (or one rank) for a single GPU.
  // `allocator`: where activation memory comes from (cuda_context.hpp).
  static Result<std::unique_ptr<CudaBackend>> create(int device, Communicator* comm = nullptr,
                                                     DeviceAllocator allocator = DeviceAllocator::kCachingPool);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;
  MemoryStats memory_stats() const override;
  Result<MemoryAvailable> memory_available() const override;

  Result<DeviceBuffer> allocate(uint64_t bytes) override;
  void deallocate(DeviceBuffer buffer) override;
  Status upload(const void* host, void* device, uint64_t bytes) override;
  Status download(const void* device, void* host, uint64_t bytes) override;
  Status synchronize() override;

  Result<WeightHandle> upload_weight(const QuantTensor& tensor) override;
  Result<WeightInfo> weight_info(WeightHandle weight) const override;
  void free_weight(WeightHandle weight) override;

  Status embed(WeightHandle table, ConstI32View tokens, F32View out) override;
  Status rms_norm(ConstF32View x, WeightHandle weight, float eps, F32View out) override;
  Status linear(ConstF32View x, WeightHandle w, WeightHandle bias, F32View y) override;
  Status linear_same_input(ConstF32View x, std::span<const LinearPart> parts) override;
  Status rope(F32View x, int heads, ConstI32View positions, const RopeParams& params) override;
  // Attention reads the whole cache every decode step at memory speed: 16-bit elements halve those bytes.
  KvType preferred_kv_type() const override { return KvType::kF16; }
  Status kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                  ConstF32View v) override;
  Status rope_kv_write(F32View q, F32View k, ConstF32View v, int heads, int kv_heads, ConstI32View positions,
                       const RopeParams& params, const KvLayerView& cache, ConstI32View slots) override;
  uint64_t attention_workspace_bytes(int64_t tokens, const AttentionParams& params, int64_t capacity) const override;
  Status attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                   const AttentionParams& params, F32View out) override;
  // Every row in one launch of the split kernel (flash-decoding) when its plan applies, else row by row.
  Status attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool, ConstI32View tables,
                         ConstI32View keys, const AttentionParams& params, F32View out) override;
  uint64_t attention_batch_workspace_bytes(int64_t items, const AttentionParams& params, int64_t slots) const override;
  Status silu_mul(ConstF32View gate, ConstF32View up, F32View out) override;
  Status gelu_tanh_mul(ConstF32View gate, ConstF32View up, F32View out) override;
  Status swiglu_clamped_mul(ConstF32View gate, ConstF32View up, float alpha, float limit, F32View out) override;
  Status add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) override;
  Status scale(ConstF32View x, float s, F32View out) override;
  Status softcap(ConstF32View x, float cap, F32View out) override;
  bool supports_graphs() const override { return true; }
  bool supports_sample() const override { return true; }
  Result<std::unique_ptr<BackendGraph>> capture(const std::function<Status()>& issue) override;
  Status launch(const BackendGraph& graph) override;
  Status add(ConstF32View a, ConstF32View b, F32View out) override;
  Status concat_cols(ConstF32View a, ConstF32View b, F32View out) override;
  Status gather_rows(ConstF32View x, ConstI32View rows, F32View out) override;
  Status add_rms_norm(F32View x, ConstF32View delta, WeightHandle weight, float eps, F32View out) override;
  Status moe_route(ConstF32View logits, bool renormalize, I32View ids, F32View weights) override;
  Status moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids, F32View weights) override;
  Status linear_experts(ConstF32View x, WeightHandle w, ConstI32View ids, F32View y) override;
  Status linear_experts_same_input(ConstF32View x, std::span<const ExpertPart> parts, ConstI32View ids) override;
  Status moe_combine(ConstF32View y, ConstF32View weights, F32View out) override;
  Status argmax(ConstF32View logits, I32View ids) override;
  // kernels/sampling/sample.hpp; the draws and penalty pairs are copied in through the upload staging.
  Status sample(ConstF32View logits, const SampleStep& step, I32View ids) override;

  // Sums x across ranks through the communicator, ordered on the compute stream (returns once enqueued).
  Status all_reduce_sum(F32View x) override;
  int tp_rank() const override;
  int tp_world_size() const override;

  const CudaDeviceProps& device_props() const { return ctx_->props(); }
  const WeightLoadStats& load_stats() const { return load_stats_; }
  // Live allocations and weights, for leak checks in tests.
  size_t live_allocations() const;
  size_t live_weights() const;

  // linear() runs the fused GEMV for up to kernels::kGemvMaxBatch rows (kernels/linear/gemv_batch.hpp) and
  // fp16 dequantization + cuBLAS on the tensor cores above.
  // The most fp16 bytes of W one prefill tile dequantizes before its GEMM (at least one row is always taken).
  // Smaller tiles use less scratch memory; tests shrink it to run the multi-tile path on small matrices.
  void set_gemm_tile_bytes(uint64_t bytes) { gemm_tile_bytes_ = bytes; }
  // Decode GEMVs of the GGML integer formats (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) quantize x to two int8 limbs and use
  // integer dot products (kernels/linear/gemv_dp4a.hpp; within about 2e-5 of the float GEMV). Off: the float GEMV
  // for every format, for comparisons.
  void set_integer_gemv(bool on) { integer_gemv_ = on; }
  // Above the GEMV batch: on, a fused dequantize + wmma kernel that reads W packed (kernels/linear/gemm_dequant_tc.hpp)
  // wherever its column steps fit the format; off (the default until a GPU has compared them), fp16 tiles of W and
  // cuBLAS. QRT_CUDA_GEMM=fused|cublas sets it at creation.
  void set_fused_gemm(bool on) { fused_gemm_ = on; }
  // Batches above the GEMV's (prefill, batched decode) read an fp16 copy of every matrix made once at upload, in one
  // cuBLAS GEMM, instead of dequantizing fp16 tiles of it at every call: each such pass then moves the matrix's
  // fp16 bytes once, for 2 bytes per weight of device memory on top of the packed ones (F16 weights are always used
  // as they are, at no extra cost, whether this is set or not). Off by default; QRT_CUDA_HALF_WEIGHTS=1 sets it at
  // creation. Applies to the weights uploaded after it is set.
  void set_half_weights(bool on) { half_weights_ = on; }
  // Batches of 2 rows and more (above kernels::kMmaMaxBatch in chunks of it) on Q4_0-Q8_0, Q2_K-Q6_K, IQ1_S-IQ4_XS,
  // TQ1_0/TQ2_0, MXFP4, NVFP4 and AFQ through the int8 tensor-core GEMM (kernels/linear/gemm_q8_mma.hpp: W read from
  // DRAM once, x in two int8 limbs as for the integer-dot GEMV) instead of the GEMV (up to 8 rows) or fp16 tiles +
  // cuBLAS (above). By default launch tuning decides per weight shape (set_launch_tuning; without it, never); on takes
  // it for every weight, off for none. QRT_CUDA_MMA=1 or 0 sets it at creation. Set it before uploading weights (their
  // buffers are sized then). min_rows 1 (QRT_CUDA_MMA=all) takes single rows too, to measure it against the GEMV at
  // batch 1.
  void set_mma_gemm(bool on, int64_t min_rows = 2) {
    mma_mode_ = on ? MmaMode::kOn : MmaMode::kOff;
    mma_min_rows_ = min_rows;
  }
  // Prompt attention with head dim 64, 96, 128 or 256: on (the default), the kernel keeping S, P and O in registers
  // (kernels/attention/attention_prefill_tc.hpp: attention_prefill_mma), over f16, bf16, fp8 and q8_0 caches; off,
  // the one keeping them in shared memory, which every other head dim of a 16-bit cache takes (fp8 and q8_0 prompts
  // then take the per-head kernel). QRT_CUDA_PREFILL_ATTENTION=registers|shared sets it at creation.
  void set_prefill_attention_registers(bool on) { prefill_attention_registers_ = on; }
  // Launch tuning: at upload, each new shape (format, rows, cols) of a matrix the integer-dot GEMV or the int8
  // tensor-core GEMM takes is timed on the device and the fastest choices are used from then on: the integer-dot GEMV's
  // rows per block (1, 2, 4 or 8 for one x row; 1 or 2 for several; the same bits whichever), and where the tensor-core
  // GEMM takes the format, whether it replaces the GEMV (the float one for AFQ2/3/5/6) for 2..8 rows (timed at 8) and
  // the fused or cuBLAS GEMM for 9..64 (timed at 32) and 65 and more (timed at 128). set_mma_gemm overrides the latter
  // for every weight. On by default on a GPU, off under the SIMT layer (its timings mean nothing); QRT_CUDA_TUNE=0|1
  // sets it at creation. Set it before uploading weights (their buffers are sized then).
  void set_launch_tuning(bool on) { launch_tuning_ = on; }
  // Programmatic dependent launch for the decode path's kernels (kernels/cuda/programmatic_launch.cuh: the norms,
  // the integer-dot, dense and staged float GEMVs, RoPE + the KV write, split attention and its merge, the gated
  // activations, x's quantization): each may be scheduled while the kernel before it still runs and waits for its
  // results inside.
  // On by default on compute capability 9.0 and later (creation sets it; QRT_CUDA_PDL=0|1 chooses instead). The
  // switch is the process's (all its CUDA backends); on needs compute capability 9.0 or later.
  Status set_programmatic_launch(bool on);
  struct TunedLinear {
    int dp4a_rows_one = 0, dp4a_rows_batch = 0;  // 0: not measured, the kernel's plan decides
    int64_t dp4a_blocks_one = 0;  // one x row: at most this many blocks, looping (0: one per row group)
    // The tensor-core GEMM for 2..8 rows, for 9..64, for 65 and more.
    bool mma_several = false, mma_wide = false, mma_tall = false;
  };
  // What launch tuning chose for a weight (all zero and false where nothing was measured).
  TunedLinear tuned_linear(WeightHandle weight) const;
  // Replaces those choices for one weight (tests; choices measured elsewhere). Rows per block: 0, 1, 2, 4 or 8 for
  // one row, 0, 1 or 2 for several; the tensor-core GEMM only where it takes the weight.
  Status set_tuned_linear(WeightHandle weight, const TunedLinear& choices);

 private:
  struct Weight;
  explicit CudaBackend(std::unique_ptr<CudaContext> ctx);

  Result<const Weight*> find_weight(WeightHandle handle, const char* op, const char* role) const;
  Status check_range(const void* p, uint64_t bytes, const char* op, const char* what) const;
  template <class T>
  Status check_view(const DeviceView<T>& v, const char* op, const char* what) const;
  // The device ranges of attention's and attention_batch's views (q, positions, key counts, out, the cache arrays).
  Status check_attention_views(const char* op, ConstF32View q, ConstI32View q_positions, ConstI32View keys,
                               F32View out, const KvLayerView& cache) const;
  // silu_mul, gelu_tanh_mul and swiglu_clamped_mul: the same checks and fused q8 output, one kernel template.
  enum class Gate { kSilu, kGeluTanh, kSwigluClamped };
  Status gated_activation(Gate gate_fn, ConstF32View gate, ConstF32View up, F32View out, float alpha = 0.0f,
                          float limit = 0.0f);
  // kv_write's shape checks and the device ranges of its views (shared with rope_kv_write).
  Status check_kv_write(const char* op, const KvLayerView& cache, ConstI32View slots, ConstI32View positions,
                        ConstF32View k, ConstF32View v) const;
  // Grows the fp32 dequantization scratch to at least `bytes`.
  Result<float*> dequant_scratch(uint64_t bytes);
  // scratch_ or a block it outgrew that a graph still names.
  bool is_scratch(const void* p) const;
  Status linear_gemm(const Weight& w, ConstF32View x, F32View y);
  // set_half_weights: w's fp16 copy (w.half), dequantized on the device.
  Status make_half_copy(Weight& w);
  // Whether linear() above the GEMV batch takes the fused dequantize + wmma kernel for w.
  bool fused_gemm_applies(const Weight& w) const;
  Status copy_weight_part(const ByteSpan& span, uint8_t* device);
  // Grows the quantized-activation buffer (and with set_mma_gemm the tiles) to hold q8_batch_rows() rows of `cols`
  // columns (at weight upload, so that no linear() inside a graph capture allocates).
  Status reserve_q8_activations(int64_t cols);
  // Launch tuning for w's shape: times the integer-dot GEMV's rows per block, and where the tensor-core GEMM takes
  // the format, it against the GEMV (8 rows) and against linear_wide (32 rows); records the fastest on w.
  Status tune_linear(Weight& w);
  // Quantizes x and runs the integer-dot GEMV when the format and buffer allow; *done says whether it ran.
  Status linear_dp4a(const Weight& w, ConstF32View x, F32View y, bool* done);
  // The same for the int8 tensor-core GEMM (set_mma_gemm), rearranging the quantized x once per input.
  Status linear_mma(const Weight& w, ConstF32View x, F32View y, bool* done);
  // Whether linear() takes the tensor-core GEMM for this weight and batch.
  bool mma_applies(const Weight& w, int64_t rows) const;
  // The most rows whose quantized activations the buffer is sized for.
  int64_t q8_batch_rows() const { return mma_buffers() ? kernels::kMmaMaxBatch : kernels::kGemvMaxBatch; }
  // Whether the tensor-core GEMM may run (set_mma_gemm, or launch tuning choosing it per weight): its buffers are
  // reserved at upload.
  bool mma_buffers() const {
    return mma_mode_ == MmaMode::kOn || (mma_mode_ == MmaMode::kTuned && launch_tuning_);
  }
  // Above the GEMV batch without the tensor-core GEMM: the fused dequantize + wmma kernel or fp16 tiles + cuBLAS.
  Status linear_wide(const Weight& w, ConstF32View x, F32View y);
  // The quantized x for the integer-dot GEMV (quantized now unless the buffer already holds it).
  Result<kernels::Q8Activations> quantized_input(ConstF32View x, int64_t cols);
  // After a linear wrote y: its bias, and the quantized input forgotten when y overwrote (part of) its source.
  Status finish_linear(const Weight* bias, F32View y);

  // Declared first so that it is destroyed last: everything below uses its device, streams and pool.
  std::unique_ptr<CudaContext> ctx_;
  std::vector<std::unique_ptr<Weight>> weights_;  // handle id - 1 -> weight (null once freed)
  PinnedStaging weight_staging_;  // weights: several large slots on the two copy streams
  PinnedStaging upload_staging_;  // upload(): small slots on the compute stream, keeping op order
  void* scratch_ = nullptr;       // pool block for dequantized weight tiles, x's quantization, slot lists
  uint64_t scratch_bytes_ = 0;
  // Whether a captured graph names scratch_: when it grows, the old block joins scratch_retired_ (kept until
  // destruction) instead of going back to the pool, where a new allocation would share it with the graph's replays.
  bool scratch_in_graph_ = false;
  std::vector<void*> scratch_retired_;
  bool capturing_ = false;  // inside capture()'s issue()
  uint64_t gemm_tile_bytes_ = uint64_t{64} << 20;
  // Quantized activations of the integer-dot GEMV: the backend's own cudaMalloc, outside the pool. A buffer that
  // grew is kept until destruction, since captured graphs may still name it.
  void* q8_buffer_ = nullptr;
  uint64_t q8_bytes_ = 0;
  std::vector<void*> q8_retired_;
  bool integer_gemv_ = true;
  bool fused_gemm_ = false;
  bool half_weights_ = false;
  bool prefill_attention_registers_ = true;
#if defined(QRT_SIMT)
  bool launch_tuning_ = false;
#else
  bool launch_tuning_ = true;
#endif
  // Launch tuning's choices by (format, rows, cols), so that a model's layers measure each shape once.
  std::map<std::tuple<int, int64_t, int64_t>, TunedLinear> linear_tuned_;
  enum class MmaMode { kTuned, kOn, kOff };
  // A batch's experts go to the tensor cores when its slots are at least kMmaMinSlotsPerExpert per expert of the stack
  // or kMmaMinSlots in all, unless set_mma_gemm decided. On an H100 (f6adc08) 64 slots over 128 experts of
  // Qwen3-30B-A3B's shape (8 tokens of a batch; 49 experts used) took 70 us on the tensor cores against 102 us in the
  // grouped integer-dot kernel for Q4_K gate (768 x 2048), 88 against 167 for down, 102 against 128 and 92 against
  // 150 for Q8_0: half a slot per expert already favours them. Fewer slots are not measured.
  static constexpr int64_t kMmaMinSlotsPerExpert = 8;
  static constexpr int64_t kMmaMinSlots = 64;
  // The largest batch of launch tuning's middle bucket (TunedLinear::mma_wide); mma_tall takes the batches above.
  static constexpr int64_t kMmaWideRows = 64;
  MmaMode mma_mode_ = MmaMode::kTuned;
  int64_t mma_min_rows_ = 2;
  // The quantized x rearranged for gemm_q8_mma (grown with q8_buffer_), valid while mma_tiles_ready_: any new
  // quantization or forgotten source clears it.
  void* mma_tiles_ = nullptr;
  uint64_t mma_tiles_bytes_ = 0;
  bool mma_tiles_ready_ = false;
  // The x whose quantization q8_buffer_ holds, so that the projections sharing an input (q, k, v; gate, up) quantize
  // it once. rms_norm and silu_mul (the producers of most GEMV inputs) write it as they write their output when it
  // fits the buffer; every other op forgets it (any of them may write x), as does a linear() whose output overlaps
  // it.
  const float* q8_source_ = nullptr;
  int64_t q8_source_rows_ = 0;
  int64_t q8_source_cols_ = 0;
  void forget_q8_source() {
    q8_source_ = nullptr;
    mma_tiles_ready_ = false;
  }
  void remember_q8_source(ConstF32View x);
  // Where a fused producer should write the quantized copy of `out` (nothing when it does not fit).
  kernels::Q8Activations fused_q8_output(F32View out) const;
  // attention() and attention_batch() through the split kernels, once they chose them.
  Status attention_split(ConstF32View q, ConstI32View q_positions, const KvLayerView& kv, ConstI32View keys,
                         const AttentionParams& p, const kernels::AttentionShape& shape,
                         const kernels::AttentionSplitPlan& plan, F32View out);
  WeightLoadStats load_stats_;
  Communicator* comm_ = nullptr;  // tensor-parallel peers; null on a single GPU
};

// The shape checks of a view and that its bytes lie inside one live allocation (every op, on every argument).
template <class T>
Status CudaBackend::check_view(const DeviceView<T>& v, const char* op, const char* what) const {
  QRT_TRY(op_checks::check_non_negative(v, op, what));
  return check_range(v.data, static_cast<uint64_t>(v.numel()) * sizeof(T), op, what);
}

}  // namespace qrt
