#include "backend/cuda_backend.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>

#include "kernels/activation/silu_mul.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/cuda/programmatic_launch.hpp"
#include "kernels/elementwise/add.hpp"
#include "kernels/embedding/embed.hpp"
#include "kernels/linear/dequant.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "kernels/moe/expert_gemv.hpp"
#include "kernels/moe/moe.hpp"
#include "kernels/norm/rms_norm.hpp"
#include "kernels/rope/rope.hpp"
#include "kernels/sampling/argmax.hpp"
#include "kernels/sampling/sample.hpp"
#include "backend/comm/communicator.hpp"
#include "backend/cuda_backend_weight.hpp"
#include "backend/make_cuda_backend.hpp"
#include "backend/op_checks.hpp"

namespace qrt {
namespace {

using op_checks::shape_string;
using op_checks::view_string;

// Weight staging: four 16 MiB pinned slots, so up to three copies are queued while the host fills the fourth.
constexpr int kWeightStagingSlots = 4;
constexpr uint64_t kWeightStagingSlotBytes = uint64_t{16} << 20;
// upload(): token ids and positions, a few bytes per call; larger uploads are chunked.
constexpr int kUploadStagingSlots = 4;
constexpr uint64_t kUploadStagingSlotBytes = uint64_t{1} << 20;
}  // namespace


Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device, Communicator* comm, DeviceAllocator allocator) {
  if (comm != nullptr && comm->world() > 1 && comm->kind() != "nccl") {
    return invalid_argument("cuda backend on device " + std::to_string(device) + ": a " + std::string(comm->kind()) +
                            " communicator reduces host memory; " + std::to_string(comm->world()) +
                            " GPU ranks need an nccl communicator");
  }
  QRT_ASSIGN_OR_RETURN(std::unique_ptr<CudaContext> ctx, CudaContext::create(device, allocator));
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(ctx)));
  backend->comm_ = comm;
  // QRT_CUDA_GEMV=float keeps x in fp32 for every decode GEMV (to compare against the integer-dot kernels).
  if (const char* gemv = std::getenv("QRT_CUDA_GEMV"); gemv != nullptr && *gemv != '\0') {
    const std::string choice(gemv);
    if (choice != "float" && choice != "integer")
      return invalid_argument("QRT_CUDA_GEMV=" + choice + ": expected float or integer");
    backend->integer_gemv_ = choice == "integer";
  }
  // QRT_CUDA_GEMM=fused runs prefill GEMMs through the fused dequantize + wmma kernel instead of fp16 tiles + cuBLAS.
  if (const char* gemm = std::getenv("QRT_CUDA_GEMM"); gemm != nullptr && *gemm != '\0') {
    const std::string choice(gemm);
    if (choice != "fused" && choice != "cublas")
      return invalid_argument("QRT_CUDA_GEMM=" + choice + ": expected fused or cublas");
    backend->fused_gemm_ = choice == "fused";
  }
  // QRT_CUDA_MMA=1 runs batches of 2 rows and more (prompts above 256 in chunks of 256) on the int8 tensor cores where
  // the format has a policy; all: single rows too; 0: never. Unset, launch tuning decides per weight shape.
  if (const char* mma = std::getenv("QRT_CUDA_MMA"); mma != nullptr && *mma != '\0') {
    const std::string choice(mma);
    if (choice != "0" && choice != "1" && choice != "all")
      return invalid_argument("QRT_CUDA_MMA=" + choice + ": expected 0, 1 or all");
    backend->set_mma_gemm(choice != "0", choice == "all" ? 1 : 2);
  }
  // QRT_CUDA_PREFILL_ATTENTION=shared runs prompt attention on the kernel keeping S, P and O in shared memory even
  // where the register kernel applies (to compare them).
  if (const char* attn = std::getenv("QRT_CUDA_PREFILL_ATTENTION"); attn != nullptr && *attn != '\0') {
    const std::string choice(attn);
    if (choice != "registers" && choice != "shared")
      return invalid_argument("QRT_CUDA_PREFILL_ATTENTION=" + choice + ": expected registers or shared");
    backend->prefill_attention_registers_ = choice == "registers";
  }
  // QRT_CUDA_TUNE=0 keeps the kernels' own work splits instead of timing them per shape at upload.
  if (const char* tune = std::getenv("QRT_CUDA_TUNE"); tune != nullptr && *tune != '\0') {
    const std::string choice(tune);
    if (choice != "0" && choice != "1") return invalid_argument("QRT_CUDA_TUNE=" + choice + ": expected 0 or 1");
    backend->launch_tuning_ = choice == "1";
  }
  // The decode path's kernels launch with programmatic stream serialization on Hopper and later (on an H100 at
  // f6adc08 decode ran 3.4% faster for Q4_K and 4.7% for Q8_0 with the same tokens); QRT_CUDA_PDL=0 turns it off.
  if (const char* pdl = std::getenv("QRT_CUDA_PDL"); pdl != nullptr && *pdl != '\0') {
    const std::string choice(pdl);
    if (choice != "0" && choice != "1") return invalid_argument("QRT_CUDA_PDL=" + choice + ": expected 0 or 1");
    QRT_TRY(backend->set_programmatic_launch(choice == "1"));
  } else {
    QRT_TRY(backend->set_programmatic_launch(backend->ctx_->props().compute_major >= 9));
  }
  // QRT_CUDA_HALF_WEIGHTS=1 keeps an fp16 copy of every matrix for the GEMMs above the GEMV batch.
  if (const char* half = std::getenv("QRT_CUDA_HALF_WEIGHTS"); half != nullptr && *half != '\0') {
    const std::string choice(half);
    if (choice != "0" && choice != "1")
      return invalid_argument("QRT_CUDA_HALF_WEIGHTS=" + choice + ": expected 0 or 1");
    backend->half_weights_ = choice == "1";
  }
  return backend;
}

Status CudaBackend::set_programmatic_launch(bool on) {
  const CudaDeviceProps& props = ctx_->props();
  if (on && props.compute_major < 9)
    return invalid_argument("programmatic dependent launch (QRT_CUDA_PDL=1) needs compute capability 9.0 or later; "
                            "device " + std::to_string(props.device) + " (" + props.name + ") is " +
                            std::to_string(props.compute_major) + "." + std::to_string(props.compute_minor));
  kernels::set_programmatic_launch(on);
  return ok_status();
}

CudaBackend::CudaBackend(std::unique_ptr<CudaContext> ctx)
    : ctx_(std::move(ctx)),
      weight_staging_(kWeightStagingSlots, kWeightStagingSlotBytes),
      upload_staging_(kUploadStagingSlots, kUploadStagingSlotBytes) {}

CudaBackend::~CudaBackend() {
  auto scope = ctx_->activate();
  cudaStreamSynchronize(ctx_->compute_stream());
  for (auto& w : weights_) {
    if (w != nullptr && w->allocation != nullptr) cudaFree(w->allocation);
    if (w != nullptr && w->half_allocation != nullptr) cudaFree(w->half_allocation);
  }
  weights_.clear();
  for (void* p : q8_retired_) cudaFree(p);
  cudaFree(q8_buffer_);
  cudaFree(mma_tiles_);
  // The pool (in ctx_) frees the scratch blocks, retired ones included, with every other block it owns.
}

std::string CudaBackend::name() const { return "cuda:" + std::to_string(ctx_->device()); }

MemoryStats CudaBackend::memory_stats() const {
  MemoryStats m;
  for (const auto& w : weights_)
    if (w != nullptr) m.weight_bytes += w->allocation_bytes;
  // The dequantization scratch is the backend's own block, counted with the activations it serves.
  m.activation_bytes = ctx_->pool().live_bytes();
  m.activation_peak_bytes = ctx_->pool().peak_bytes();
  return m;
}

Result<MemoryAvailable> CudaBackend::memory_available() const {
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  size_t free_bytes = 0, total_bytes = 0;
  QRT_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  return MemoryAvailable{free_bytes, total_bytes};
}

size_t CudaBackend::live_allocations() const {
  // The dequantization scratch (and any block it outgrew that a graph names) is the backend's own, not a caller's.
  return ctx_->pool().live_count() - (scratch_ != nullptr ? 1 : 0) - scratch_retired_.size();
}

size_t CudaBackend::live_weights() const {
  size_t n = 0;
  for (const auto& w : weights_) n += w != nullptr;
  return n;
}

// ---- memory -------------------------------------------------------------------------------------------------

Result<DeviceBuffer> CudaBackend::allocate(uint64_t bytes) {
  forget_q8_source();
  if (bytes == 0) return DeviceBuffer{};
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  QRT_ASSIGN_OR_RETURN(void* p, ctx_->pool().allocate(bytes));
  return DeviceBuffer{p, bytes};
}

void CudaBackend::deallocate(DeviceBuffer buffer) {
  forget_q8_source();
  if (buffer.ptr == nullptr || is_scratch(buffer.ptr)) return;  // never free foreign memory or our scratch
  ctx_->pool().release(buffer.ptr);  // ops still queued on the one stream run before any reuse
}

Status CudaBackend::check_range(const void* p, uint64_t bytes, const char* op, const char* what) const {
  if (bytes == 0) return ok_status();
  CachingPool::Block block;
  if (ctx_->pool().find_live(p, bytes, &block) && !is_scratch(reinterpret_cast<const void*>(block.start)))
    return ok_status();
  return out_of_range(std::string(op) + ": " + what + " (" + std::to_string(bytes) +
                      " bytes) is not inside a device allocation");
}

Status CudaBackend::upload(const void* host, void* device, uint64_t bytes) {
  forget_q8_source();
  QRT_TRY(check_range(device, bytes, "upload", "destination"));
  if (bytes == 0) return ok_status();
  if (host == nullptr) return invalid_argument("upload: null host pointer");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  return upload_staging_.copy(host, device, bytes, std::span<const cudaStream_t>(&stream, 1));
}

Status CudaBackend::download(const void* device, void* host, uint64_t bytes) {
  QRT_TRY(check_range(device, bytes, "download", "source"));
  if (bytes == 0) return ok_status();
  if (host == nullptr) return invalid_argument("download: null host pointer");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  QRT_CUDA_TRY(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, ctx_->compute_stream()));
  QRT_CUDA_TRY(cudaStreamSynchronize(ctx_->compute_stream()));
  return ok_status();
}

Status CudaBackend::synchronize() {
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  QRT_CUDA_TRY(cudaStreamSynchronize(ctx_->compute_stream()));
  return cuda_launch_status("synchronize (a fault of an earlier op)");
}

bool CudaBackend::is_scratch(const void* p) const {
  return p != nullptr && (p == scratch_ || std::find(scratch_retired_.begin(), scratch_retired_.end(), p) !=
                                               scratch_retired_.end());
}

Result<float*> CudaBackend::dequant_scratch(uint64_t bytes) {
  if (bytes <= scratch_bytes_) {
    scratch_in_graph_ = scratch_in_graph_ || capturing_;
    return static_cast<float*>(scratch_);
  }
  const bool retire = scratch_ != nullptr && scratch_in_graph_;
  if (retire) {
    // A captured graph names this block and replays into it: keep it out of the pool for the backend's life, and
    // grow by half at least so that the blocks kept stay within twice the largest.
    scratch_retired_.push_back(scratch_);
    bytes = std::max(bytes, scratch_bytes_ + scratch_bytes_ / 2);
  } else if (scratch_ != nullptr) {
    ctx_->pool().release(scratch_);  // earlier GEMMs on the stream finish before reuse
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  QRT_ASSIGN_OR_RETURN(void* p, ctx_->pool().allocate(bytes));
  scratch_ = p;
  scratch_bytes_ = bytes;
  scratch_in_graph_ = capturing_;
  return static_cast<float*>(p);
}

Status CudaBackend::reserve_q8_activations(int64_t cols) {
  // Grows one buffer to `bytes`, keeping the old one (captured graphs may name it).
  const auto grow = [this](void** buffer, uint64_t* size, uint64_t bytes, const char* what) -> Status {
    if (bytes <= *size) return ok_status();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return cuda_status(err, "cudaMalloc").with_context(std::string(what) + " (" + std::to_string(bytes) + " bytes)");
    }
    if (*buffer != nullptr) q8_retired_.push_back(*buffer);
    *buffer = p;
    *size = bytes;
    return ok_status();
  };
  QRT_TRY(grow(&q8_buffer_, &q8_bytes_, kernels::q8_activation_bytes(q8_batch_rows(), cols), "quantized activations"));
  if (mma_buffers()) {
    QRT_TRY(grow(&mma_tiles_, &mma_tiles_bytes_, kernels::q8_mma_tile_bytes(kernels::kMmaMaxBatch, cols),
                 "tensor-core activation tiles"));
  }
  return ok_status();
}

// ---- weights ------------------------------------------------------------------------------------------------

Status CudaBackend::copy_weight_part(const ByteSpan& span, uint8_t* device) {
  if (span.size == 0) return ok_status();
  const cudaStream_t streams[2] = {ctx_->copy_stream(0), ctx_->copy_stream(1)};
  return weight_staging_.copy(span.data, device, span.size, streams);
}

Result<WeightHandle> CudaBackend::upload_weight(const QuantTensor& t) {
  forget_q8_source();
  const auto start = std::chrono::steady_clock::now();
  const std::string where = "uploading " + t.name + (t.file.empty() ? "" : " from " + t.file);
  QRT_ASSIGN_OR_RETURN(const quant::PartSizes matrix_parts, op_checks::weight_matrix_parts(t));
  auto w = std::make_unique<Weight>();
  w->format = t.format;
  w->shape = t.shape;
  w->params = t.params;
  w->matrix_parts = matrix_parts;

  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  std::vector<float> values;
  uint64_t bytes = 0;
  if (t.shape.size() == 1) {
    // Norm weights and biases: decoded once on the host, stored as f32 (their packed form is never read).
    values.resize(static_cast<size_t>(t.shape[0]));
    Status s = cpu::dequantize(t.format, t.view(), values.data());
    if (!s.ok()) return s.with_context(where);
    bytes = values.size() * sizeof(float);
  } else {
    bytes = align_up(t.data.size, kPartAlignment) + align_up(t.scales.size, kPartAlignment) + t.biases.size;
  }
  void* allocation = nullptr;
  const cudaError_t err = cudaMalloc(&allocation, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky; keep it from surfacing at the next launch check
    return cuda_status(err, "cudaMalloc").with_context(where + " (" + std::to_string(bytes) + " bytes)");
  }
  w->allocation = allocation;
  w->allocation_bytes = bytes;
  auto* base = static_cast<uint8_t*>(allocation);
  Status copied;
  if (!values.empty()) {
    w->values = reinterpret_cast<const float*>(base);
    copied = copy_weight_part(ByteSpan{reinterpret_cast<const uint8_t*>(values.data()), bytes}, base);
  } else {
    uint8_t* scales = base + align_up(t.data.size, kPartAlignment);
    uint8_t* biases = scales + align_up(t.scales.size, kPartAlignment);
    w->data = base;
    w->scales = t.scales.size ? scales : nullptr;
    w->biases = t.biases.size ? biases : nullptr;
    copied = copy_weight_part(t.data, base);
    if (copied.ok()) copied = copy_weight_part(t.scales, scales);
    if (copied.ok()) copied = copy_weight_part(t.biases, biases);
  }
  // Wait for the copies even after an error: the staging slots and `values` must not be in use when we return.
  Status waited = weight_staging_.wait();
  if (copied.ok()) copied = waited;
  if (!copied.ok()) {
    cudaFree(allocation);
    return copied.with_context(where);
  }
  // Room to quantize x for the integer-dot kernels this weight takes (a stack of experts: its one-token kernel), and
  // for the tensor-core GEMM where it may run: a format with a tensor-core policy and no integer-dot one (AFQ2/3/5/6)
  // reserves the buffers itself, or a model of only such matrices would never find them sized.
  const bool matrix = t.shape.size() == 2;
  if ((matrix && kernels::gemv_dp4a_applies(w->format, w->view())) ||
      (matrix && mma_buffers() && kernels::gemm_q8_mma_applies(w->format, w->view())) ||
      (t.shape.size() == 3 && kernels::expert_gemv_dp4a_applies(w->format, w->first_matrix_view(), w->matrix_parts))) {
    Status reserved = reserve_q8_activations(w->cols());
    if (reserved.ok() && launch_tuning_ && integer_gemv_ && matrix) reserved = tune_linear(*w);
    if (!reserved.ok()) {
      cudaFree(allocation);
      return reserved.with_context(where);
    }
  }
  // An F16 matrix is its own fp16 copy: cuBLAS reads it as it is, with or without set_half_weights.
  if ((half_weights_ || w->format == quant::FormatId::kF16) && t.shape.size() == 2) {
    Status made = make_half_copy(*w);
    if (!made.ok()) {
      cudaFree(allocation);
      return made.with_context(where + " (set_half_weights / QRT_CUDA_HALF_WEIGHTS)");
    }
  }
  weights_.push_back(std::move(w));
  load_stats_.bytes += values.empty() ? t.bytes() : bytes;
  load_stats_.tensors += 1;
  load_stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return WeightHandle{static_cast<uint32_t>(weights_.size())};
}

Result<const CudaBackend::Weight*> CudaBackend::find_weight(WeightHandle h, const char* op, const char* role) const {
  if (!h.valid() || h.id > weights_.size() || weights_[h.id - 1] == nullptr)
    return invalid_argument(std::string(op) + ": " + role + " is not a live weight handle (" + std::to_string(h.id) +
                            ")");
  return weights_[h.id - 1].get();
}

Result<WeightInfo> CudaBackend::weight_info(WeightHandle h) const {
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(h, "weight_info", "weight"));
  return WeightInfo{w->format, w->shape};
}

void CudaBackend::free_weight(WeightHandle h) {
  forget_q8_source();
  if (!h.valid() || h.id > weights_.size() || weights_[h.id - 1] == nullptr) return;
  auto scope = ctx_->activate();
  cudaStreamSynchronize(ctx_->compute_stream());  // queued ops may still read it
  cudaFree(weights_[h.id - 1]->allocation);
  if (weights_[h.id - 1]->half_allocation != nullptr) cudaFree(weights_[h.id - 1]->half_allocation);
  weights_[h.id - 1].reset();
}

Status CudaBackend::make_half_copy(Weight& w) {
  if (w.format == quant::FormatId::kF16) {
    w.half = w.data;
    return ok_status();
  }
  const quant::QuantView view = w.view();
  const uint64_t bytes = static_cast<uint64_t>(view.rows) * static_cast<uint64_t>(view.cols) * sizeof(__half);
  const cudaError_t err = cudaMalloc(&w.half_allocation, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    w.half_allocation = nullptr;
    return cuda_status(err, "cudaMalloc").with_context("an fp16 copy of " + std::to_string(bytes) + " bytes");
  }
  Status s = kernels::dequantize_rows_half(w.format, view, 0, view.rows, static_cast<__half*>(w.half_allocation),
                                           ctx_->compute_stream());
  if (!s.ok()) {
    cudaFree(w.half_allocation);
    w.half_allocation = nullptr;
    return s;
  }
  w.half = w.half_allocation;
  return ok_status();
}

// ---- ops ----------------------------------------------------------------------------------------------------

Status CudaBackend::embed(WeightHandle table, ConstI32View tokens, F32View out) {
  forget_q8_source();
  const char* op = "embed";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(table, op, "table"));
  QRT_TRY(op_checks::embed(WeightInfo{w->format, w->shape}, tokens, out));
  QRT_TRY(check_view(tokens, op, "tokens"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::embed(w->format, w->view(), tokens.data, tokens.rows, out.data, ctx_->compute_stream());
}

Status CudaBackend::rms_norm(ConstF32View x, WeightHandle weight, float eps, F32View out) {
  forget_q8_source();
  const char* op = "rms_norm";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  QRT_TRY(op_checks::rms_norm(x, WeightInfo{w->format, w->shape}, out));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::Q8Activations q8 = fused_q8_output(out);
  QRT_TRY(kernels::rms_norm(x.data, w->values, x.rows, x.cols, eps, out.data, ctx_->compute_stream(), q8));
  if (q8.codes != nullptr) remember_q8_source(out);
  return ok_status();
}

Status CudaBackend::add_rms_norm(F32View x, ConstF32View delta, WeightHandle weight, float eps, F32View out) {
  forget_q8_source();
  const char* op = "add_rms_norm";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  QRT_TRY(op_checks::same_shape3(op, "x", x, "delta", delta, out));
  QRT_TRY(op_checks::rms_norm(x, WeightInfo{w->format, w->shape}, out));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(delta, op, "delta"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::Q8Activations q8 = fused_q8_output(out);
  QRT_TRY(kernels::add_rms_norm(x.data, delta.data, w->values, x.rows, x.cols, eps, out.data, ctx_->compute_stream(),
                                q8));
  if (q8.codes != nullptr) remember_q8_source(out);
  return ok_status();
}

Status CudaBackend::rope(F32View x, int heads, ConstI32View positions, const RopeParams& p) {
  forget_q8_source();
  const char* op = "rope";
  QRT_TRY(op_checks::rope(x, heads, positions, p));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(positions, op, "positions"));
  QRT_TRY(check_view(p.inv_freq, op, "inv_freq"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::RopeShape shape{x.rows, heads, p.head_dim, p.rot_dim, p.attn_factor,
                                 p.layout == RopeLayout::kInterleaved};
  return kernels::rope(x.data, positions.data, p.inv_freq.data, shape, ctx_->compute_stream());
}

Status CudaBackend::silu_mul(ConstF32View gate, ConstF32View up, F32View out) {
  return gated_activation(Gate::kSilu, gate, up, out);
}

Status CudaBackend::gelu_tanh_mul(ConstF32View gate, ConstF32View up, F32View out) {
  return gated_activation(Gate::kGeluTanh, gate, up, out);
}

Status CudaBackend::swiglu_clamped_mul(ConstF32View gate, ConstF32View up, float alpha, float limit, F32View out) {
  return gated_activation(Gate::kSwigluClamped, gate, up, out, alpha, limit);
}

Status CudaBackend::gated_activation(Gate act, ConstF32View gate, ConstF32View up, F32View out, float alpha,
                                     float limit) {
  forget_q8_source();
  const char* op = act == Gate::kGeluTanh        ? "gelu_tanh_mul"
                   : act == Gate::kSwigluClamped ? "swiglu_clamped_mul"
                                                 : "silu_mul";
  QRT_TRY(op_checks::same_shape3(op, "gate", gate, "up", up, out));
  QRT_TRY(check_view(gate, op, "gate"));
  QRT_TRY(check_view(up, op, "up"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::Q8Activations q8 = fused_q8_output(out);
  const cudaStream_t stream = ctx_->compute_stream();
  if (act == Gate::kSwigluClamped) {
    QRT_TRY(kernels::swiglu_clamped_mul(gate.data, up.data, gate.numel(), alpha, limit, out.data, stream, q8));
  } else {
    const auto launch = act == Gate::kGeluTanh ? kernels::gelu_tanh_mul : kernels::silu_mul;
    QRT_TRY(launch(gate.data, up.data, gate.numel(), out.data, stream, q8));
  }
  if (q8.codes != nullptr) remember_q8_source(out);
  return ok_status();
}

Status CudaBackend::add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) {
  forget_q8_source();
  const char* op = "add_indexed_rows";
  QRT_TRY(op_checks::add_indexed_rows(y, table, ids));
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(check_view(table, op, "table"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::add_indexed_rows(y.data, table.data, table.rows, ids.data, y.rows, y.cols, ctx_->compute_stream());
}

Status CudaBackend::scale(ConstF32View x, float s, F32View out) {
  forget_q8_source();
  const char* op = "scale";
  QRT_TRY(op_checks::elementwise(op, x, out));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::scale(x.data, s, x.numel(), out.data, ctx_->compute_stream());
}

Status CudaBackend::softcap(ConstF32View x, float cap, F32View out) {
  forget_q8_source();
  const char* op = "softcap";
  QRT_TRY(op_checks::softcap(x, cap, out));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::softcap(x.data, cap, x.numel(), out.data, ctx_->compute_stream());
}

Status CudaBackend::add(ConstF32View a, ConstF32View b, F32View out) {
  forget_q8_source();
  const char* op = "add";
  QRT_TRY(op_checks::same_shape3(op, "a", a, "b", b, out));
  QRT_TRY(check_view(a, op, "a"));
  QRT_TRY(check_view(b, op, "b"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::add(a.data, b.data, a.numel(), out.data, ctx_->compute_stream());
}

Status CudaBackend::concat_cols(ConstF32View a, ConstF32View b, F32View out) {
  forget_q8_source();
  const char* op = "concat_cols";
  QRT_TRY(op_checks::concat_cols(a, b, out));
  QRT_TRY(check_view(a, op, "a"));
  QRT_TRY(check_view(b, op, "b"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::concat_cols(a.data, a.cols, b.data, b.cols, a.rows, out.data, ctx_->compute_stream());
}

Status CudaBackend::gather_rows(ConstF32View x, ConstI32View rows, F32View out) {
  forget_q8_source();
  const char* op = "gather_rows";
  QRT_TRY(op_checks::gather_rows(x, rows, out));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(rows, op, "rows"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::gather_rows(x.data, x.rows, x.cols, rows.data, rows.rows, out.data, ctx_->compute_stream());
}

Status CudaBackend::moe_route(ConstF32View logits, bool renormalize, I32View ids, F32View weights) {
  forget_q8_source();
  const char* op = "moe_route";
  QRT_TRY(op_checks::moe_route(logits, ids, weights));
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(weights, op, "weights"));
  if (logits.cols > kernels::kMaxRoutedExperts)
    return unsupported("moe_route: " + std::to_string(logits.cols) + " experts (the CUDA router handles up to " +
                       std::to_string(kernels::kMaxRoutedExperts) + ")");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::moe_route(logits.data, logits.rows, static_cast<int>(logits.cols), static_cast<int>(ids.cols),
                            renormalize, ids.data, weights.data, ctx_->compute_stream());
}

Status CudaBackend::moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids,
                                      F32View weights) {
  forget_q8_source();
  const char* op = "moe_route_grouped";
  QRT_TRY(op_checks::moe_route_grouped(logits, routing, ids, weights));
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(weights, op, "weights"));
  if (routing.choice_bias != nullptr)
    QRT_TRY(check_range(routing.choice_bias, static_cast<uint64_t>(logits.cols) * sizeof(float), op, "choice bias"));
  if (logits.cols > kernels::kMaxGroupedRoutedExperts || routing.groups > kernels::kMaxExpertGroups)
    return unsupported("moe_route_grouped: " + std::to_string(logits.cols) + " experts in " +
                       std::to_string(routing.groups) + " groups (the CUDA router handles up to " +
                       std::to_string(kernels::kMaxGroupedRoutedExperts) + " in " +
                       std::to_string(kernels::kMaxExpertGroups) + ")");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::moe_route_grouped(logits.data, logits.rows, static_cast<int>(logits.cols),
                                    static_cast<int>(ids.cols), routing, ids.data, weights.data,
                                    ctx_->compute_stream());
}

Status CudaBackend::moe_combine(ConstF32View y, ConstF32View weights, F32View out) {
  forget_q8_source();
  const char* op = "moe_combine";
  QRT_TRY(op_checks::moe_combine(y, weights, out));
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(check_view(weights, op, "weights"));
  QRT_TRY(check_view(out, op, "out"));
  if (weights.cols > INT_MAX) return unsupported("moe_combine: top_k exceeds 32 bits");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::moe_combine(y.data, weights.data, weights.rows, static_cast<int>(weights.cols), y.cols, out.data,
                              ctx_->compute_stream());
}

Status CudaBackend::argmax(ConstF32View logits, I32View ids) {
  forget_q8_source();
  const char* op = "argmax";
  QRT_TRY(op_checks::argmax(logits, ids));
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::argmax_rows(logits.data, logits.rows, logits.cols, ids.data, ctx_->compute_stream());
}

Status CudaBackend::sample(ConstF32View logits, const SampleStep& step, I32View ids) {
  forget_q8_source();
  const char* op = "sample";
  QRT_TRY(op_checks::sample(logits, step, ids));
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  if (logits.rows == 0) return ok_status();
  static_assert(sizeof(PenaltyCount) == 2 * sizeof(int32_t) && std::is_standard_layout_v<PenaltyCount>,
                "PenaltyCount is uploaded as (token, count) int32 pairs");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  // The dequantization scratch (stream-ordered like every op) holds the kernel workspace, then the host inputs.
  QRT_ASSIGN_OR_RETURN(const uint64_t work_bytes, kernels::sample_rows_workspace_bytes(logits.rows, logits.cols));
  const uint64_t u01_bytes = step.u01.size() * sizeof(double);
  const uint64_t offsets_bytes = step.penalty_offsets.size() * sizeof(int32_t);
  const uint64_t pairs_bytes = step.penalties.size() * sizeof(PenaltyCount);
  const uint64_t u01_at = work_bytes, offsets_at = align_up(u01_at + u01_bytes, kPartAlignment);
  const uint64_t pairs_at = align_up(offsets_at + offsets_bytes, kPartAlignment);
  const uint64_t total = align_up(pairs_at + pairs_bytes + 1, kPartAlignment);
  QRT_ASSIGN_OR_RETURN(float* scratch, dequant_scratch(total));
  uint8_t* base = reinterpret_cast<uint8_t*>(scratch);
  const std::span<const cudaStream_t> streams(&stream, 1);
  QRT_TRY(upload_staging_.copy(step.u01.data(), base + u01_at, u01_bytes, streams));
  kernels::SampleRowsArgs args;
  args.logits = logits.data;
  args.rows = logits.rows;
  args.vocab = logits.cols;
  const SamplingParams& p = step.params;
  args.settings = {p.temperature,        p.top_k,          p.top_p, p.min_p, p.repetition_penalty,
                   p.presence_penalty, p.frequency_penalty};
  args.u01 = reinterpret_cast<const double*>(base + u01_at);
  if (!step.penalty_offsets.empty() && !step.penalties.empty()) {
    QRT_TRY(upload_staging_.copy(step.penalty_offsets.data(), base + offsets_at, offsets_bytes, streams));
    QRT_TRY(upload_staging_.copy(step.penalties.data(), base + pairs_at, pairs_bytes, streams));
    args.penalty_offsets = reinterpret_cast<const int32_t*>(base + offsets_at);
    args.penalty_pairs = reinterpret_cast<const int32_t*>(base + pairs_at);
  }
  args.ids = ids.data;
  return kernels::sample_rows(args, base, work_bytes, stream);
}

// ---- graphs -------------------------------------------------------------------------------------------------

namespace {

// An instantiated CUDA graph and the backend that captured it (launch checks that it is the same one).
class CudaGraph final : public BackendGraph {
 public:
  CudaGraph(const CudaBackend* owner, cudaGraphExec_t exec, uint64_t operations)
      : owner_(owner), exec_(exec), operations_(operations) {}
  ~CudaGraph() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  const CudaBackend* owner() const { return owner_; }
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t operations() const override { return operations_; }

 private:
  const CudaBackend* owner_;
  cudaGraphExec_t exec_;
  uint64_t operations_;
};

}  // namespace

Result<std::unique_ptr<BackendGraph>> CudaBackend::capture(const std::function<Status()>& issue) {
  forget_q8_source();
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  // Thread-local: tensor-parallel ranks capture at the same time from their own threads, and an unrelated CUDA
  // call of another thread must not invalidate this capture.
  QRT_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  const Status issued = issue();
  capturing_ = false;
  // The captured ops were recorded, not run: no quantized activation they "wrote" exists yet.
  forget_q8_source();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!issued.ok() || ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a broken capture is reported here, not at the next launch
    if (!issued.ok()) return issued.with_context("capturing a graph");
    return cuda_status(ended, "cudaStreamEndCapture");
  }
  size_t nodes = 0;  // reported per token by bench-model: the launches one graph launch stands for
  const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (counted != cudaSuccess) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    return cuda_status(counted, "cudaGraphGetNodes");
  }
  if (made != cudaSuccess) return cuda_status(made, "cudaGraphInstantiate");
  return std::unique_ptr<BackendGraph>(new CudaGraph(this, exec, nodes));
}

Status CudaBackend::launch(const BackendGraph& graph) {
  forget_q8_source();
  const auto* g = dynamic_cast<const CudaGraph*>(&graph);
  if (g == nullptr || g->owner() != this) return invalid_argument("launch: the graph was captured by another backend");
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  QRT_CUDA_TRY(cudaGraphLaunch(g->exec(), ctx_->compute_stream()));
  return ok_status();
}

// ---- tensor parallelism -------------------------------------------------------------------------------------

Status CudaBackend::all_reduce_sum(F32View x) {
  forget_q8_source();
  QRT_TRY(check_view(x, "all_reduce_sum", "x"));
  if (comm_ == nullptr || x.numel() == 0) return ok_status();
  return comm_->all_reduce_sum(x.data, static_cast<size_t>(x.numel()), ctx_->compute_stream());
}

int CudaBackend::tp_rank() const { return comm_ ? comm_->rank() : 0; }
int CudaBackend::tp_world_size() const { return comm_ ? comm_->world() : 1; }

// ---- factory ------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, Communicator* comm) {
  QRT_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::create(device, comm));
  return std::unique_ptr<Backend>(std::move(backend));
}

bool cuda_backend_built() { return true; }

}  // namespace qrt
