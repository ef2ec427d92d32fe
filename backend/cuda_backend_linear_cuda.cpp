// The CUDA backend's matrix products: linear (the integer-dot and dense GEMVs, the int8 tensor-core GEMM, the fused
// or cuBLAS prefill GEMMs), projections sharing an input in one launch, the stacked experts of MoE layers, and the
// quantized activations they share.
#include <algorithm>
#include <climits>
#include <span>
#include <string>

#include "backend/cuda_backend.hpp"
#include "backend/cuda_backend_weight.hpp"
#include "backend/op_checks.hpp"
#include "kernels/elementwise/add.hpp"
#include "kernels/linear/dequant.hpp"
#include "kernels/linear/gemm_dequant_tc.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "kernels/moe/expert_gemv.hpp"

namespace qrt {

Status CudaBackend::linear(ConstF32View x, WeightHandle weight, WeightHandle bias, F32View y) {
  const char* op = "linear";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  const Weight* b = nullptr;
  WeightInfo bias_info;
  if (bias.valid()) {
    QRT_ASSIGN_OR_RETURN(b, find_weight(bias, op, "bias"));
    bias_info = WeightInfo{b->format, b->shape};
  }
  QRT_TRY(op_checks::linear(x, WeightInfo{w->format, w->shape}, b ? &bias_info : nullptr, y));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(y, op, "y"));
  if (x.rows == 0) return ok_status();
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  if (mma_applies(*w, x.rows)) {
    bool done = false;
    QRT_TRY(linear_mma(*w, x, y, &done));
    if (done) return finish_linear(b, y);
  }
  if (x.rows <= kernels::kGemvMaxBatch) {
    bool done = false;
    QRT_TRY(linear_dp4a(*w, x, y, &done));
    if (!done) QRT_TRY(kernels::gemv(w->format, w->view(), x.data, static_cast<int>(x.rows), y.data, stream));
  } else {
    QRT_TRY(linear_wide(*w, x, y));
  }
  return finish_linear(b, y);
}

Status CudaBackend::linear_wide(const Weight& w, ConstF32View x, F32View y) {
  // fp16 copies made at upload (set_half_weights; an F16 weight is its own) go to cuBLAS whatever set_fused_gemm says;
  // an F16 weight without that setting takes the fused kernel when it is chosen, as every other format does.
  const bool half_copy = w.half_allocation != nullptr || (w.format == quant::FormatId::kF16 && half_weights_);
  if (!half_copy && fused_gemm_applies(w))
    return kernels::gemm_dequant_tc(w.format, w.view(), x.data, x.rows, y.data, ctx_->compute_stream());
  return linear_gemm(w, x, y);
}

Status CudaBackend::finish_linear(const Weight* bias, F32View y) {
  if (bias != nullptr)
    QRT_TRY(kernels::add_bias_rows(y.data, bias->values, y.rows, y.cols, ctx_->compute_stream()));
  // y overwrote (part of) the quantized x's source: the next linear quantizes again.
  if (q8_source_ != nullptr) {
    const auto at = [](const float* p) { return reinterpret_cast<uintptr_t>(p); };
    if (at(y.data) < at(q8_source_ + q8_source_rows_ * q8_source_cols_) && at(q8_source_) < at(y.data + y.numel()))
      forget_q8_source();
  }
  return ok_status();
}

// One GEMV launch for all parts when they share a format and width and the batch fits the GEMV: the integer-dot
// kernel for the integer formats it has, the dense kernel for F32/F16/BF16. Any other case (mixed formats such as
// Q4_K_M's q6_k v projection, wide batches, formats with neither kernel) is the separate linear() calls.
Status CudaBackend::linear_same_input(ConstF32View x, std::span<const LinearPart> parts) {
  const char* op = "linear_same_input";
  if (parts.size() < 2 || parts.size() > size_t{kernels::kGemvMaxParts} || x.rows < 1 ||
      x.rows > kernels::kGemvMaxBatch)
    return Backend::linear_same_input(x, parts);
  std::vector<const Weight*> weights, biases;
  std::vector<kernels::GemvPart> gemv_parts;
  for (const LinearPart& part : parts) {
    QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(part.w, op, "weight"));
    if (w->format != (weights.empty() ? w->format : weights[0]->format)) return Backend::linear_same_input(x, parts);
    // The tensor-core GEMM takes the parts one by one (each linear() reuses the rearranged x).
    if (mma_applies(*w, x.rows)) return Backend::linear_same_input(x, parts);
    weights.push_back(w);
    gemv_parts.push_back({w->view(), part.y.data});
  }
  const quant::FormatId format = weights[0]->format;
  const quant::QuantView first = weights[0]->view();
  bool dp4a = integer_gemv_ && kernels::q8_activation_bytes(x.rows, first.cols) <= q8_bytes_;
  for (const kernels::GemvPart& part : gemv_parts)
    dp4a = dp4a && kernels::gemv_dp4a_applies(format, part.w) && part.w.cols == first.cols &&
           part.w.params.group_size == first.params.group_size && part.w.params.scale_type == first.params.scale_type &&
           part.w.params.global_scale == first.params.global_scale;  // NVFP4's tensor scale: one per launch
  const bool dense = !dp4a && kernels::gemv_dense_parts_apply(format, gemv_parts, x.data);
  if (!dp4a && !dense) return Backend::linear_same_input(x, parts);
  for (size_t j = 0; j < parts.size(); ++j) {
    const LinearPart& part = parts[j];
    const Weight* b = nullptr;
    WeightInfo bias_info;
    if (part.bias.valid()) {
      QRT_ASSIGN_OR_RETURN(b, find_weight(part.bias, op, "bias"));
      bias_info = WeightInfo{b->format, b->shape};
    }
    biases.push_back(b);
    const WeightInfo info{weights[j]->format, weights[j]->shape};
    QRT_TRY(op_checks::linear(x, info, b ? &bias_info : nullptr, part.y));
    QRT_TRY(check_view(part.y, op, "y"));
  }
  QRT_TRY(check_view(x, op, "x"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const int m = static_cast<int>(x.rows);
  if (dp4a) {
    QRT_ASSIGN_OR_RETURN(const kernels::Q8Activations q, quantized_input(x, first.cols));
    // The rows per block tuned for the tallest part, whose blocks are most of the launch.
    const Weight* tallest = *std::max_element(weights.begin(), weights.end(),
                                              [](const Weight* a, const Weight* b) { return a->rows() < b->rows(); });
    QRT_TRY(kernels::gemv_dp4a_parts(format, gemv_parts, {q.codes, q.scales}, m, ctx_->compute_stream(),
                                     m == 1 ? tallest->dp4a_rows_one : tallest->dp4a_rows_batch,
                                     m == 1 ? tallest->dp4a_blocks_one : 0));
  } else {
    QRT_TRY(kernels::gemv_dense_parts(format, gemv_parts, x.data, m, ctx_->compute_stream()));
  }
  for (size_t j = 0; j < parts.size(); ++j) QRT_TRY(finish_linear(biases[j], parts[j].y));
  return ok_status();
}

// One token's stacks in one integer-dot launch when they agree in format, shape and per-expert layout (a layer's gate
// and up experts); any other case is the separate linear_experts() calls, whose values these are.
Status CudaBackend::linear_experts_same_input(ConstF32View x, std::span<const ExpertPart> parts, ConstI32View ids) {
  const char* op = "linear_experts_same_input";
  if (parts.size() < 2 || parts.size() > size_t{kernels::kGemvMaxParts} || ids.rows != 1 || !integer_gemv_ ||
      kernels::q8_activation_bytes(x.rows, x.cols) > q8_bytes_)
    return Backend::linear_experts_same_input(x, parts, ids);
  std::vector<const Weight*> weights;
  std::vector<kernels::GemvPart> stacks;
  for (const ExpertPart& part : parts) {
    QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(part.w, op, "weight"));
    const Weight* first = weights.empty() ? w : weights[0];
    const quant::PartSizes& a = w->matrix_parts;
    const quant::PartSizes& b = first->matrix_parts;
    if (w->format != first->format || w->shape != first->shape || a.data != b.data || a.scales != b.scales ||
        a.biases != b.biases || w->shape.size() != 3 || w->shape[0] > INT_MAX || ids.cols > INT_MAX ||
        !kernels::expert_gemv_dp4a_applies(w->format, w->first_matrix_view(), w->matrix_parts))
      return Backend::linear_experts_same_input(x, parts, ids);
    QRT_TRY(op_checks::linear_experts(x, WeightInfo{w->format, w->shape}, ids, part.y));
    QRT_TRY(check_view(part.y, op, "y"));
    weights.push_back(w);
    stacks.push_back({w->first_matrix_view(), part.y.data});
  }
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const Weight& first = *weights[0];
  const kernels::ExpertGemvShape shape{ids.rows, static_cast<int>(ids.cols), static_cast<int>(first.shape[0]),
                                       x.rows == ids.rows};
  QRT_ASSIGN_OR_RETURN(const kernels::Q8Activations q, quantized_input(x, x.cols));
  QRT_TRY(kernels::expert_gemv_dp4a_stacks(first.format, stacks, first.matrix_parts, ids.data, shape,
                                           {q.codes, q.scales}, ctx_->compute_stream()));
  for (const ExpertPart& part : parts) QRT_TRY(finish_linear(nullptr, part.y));
  return ok_status();
}

bool CudaBackend::fused_gemm_applies(const Weight& w) const {
  if (!fused_gemm_) return false;
  const int chunk = kernels::gemm_dequant_tc_chunk(w.format, w.view());
  return chunk > 0 && kernels::gemm_dequant_tc_shared_bytes(chunk) <= ctx_->props().shared_mem_per_block_optin;
}

kernels::Q8Activations CudaBackend::fused_q8_output(F32View out) const {
  if (!integer_gemv_ || out.rows < 1 || out.rows > q8_batch_rows() || out.cols % kernels::kQ8BlockCols != 0 ||
      kernels::q8_activation_bytes(out.rows, out.cols) > q8_bytes_)
    return {};
  return kernels::q8_activations_at(q8_buffer_, out.rows, out.cols);
}

void CudaBackend::remember_q8_source(ConstF32View x) {
  mma_tiles_ready_ = false;  // the buffer holds a new quantization, whatever its source
  q8_source_ = x.data;
  q8_source_rows_ = x.rows;
  q8_source_cols_ = x.cols;
}

Status CudaBackend::linear_dp4a(const Weight& w, ConstF32View x, F32View y, bool* done) {
  *done = false;
  const quant::QuantView view = w.view();
  if (!integer_gemv_ || !kernels::gemv_dp4a_applies(w.format, view) ||
      kernels::q8_activation_bytes(x.rows, view.cols) > q8_bytes_)
    return ok_status();
  QRT_ASSIGN_OR_RETURN(const kernels::Q8Activations q, quantized_input(x, view.cols));
  QRT_TRY(kernels::gemv_dp4a_rows(w.format, view, {q.codes, q.scales}, static_cast<int>(x.rows), y.data,
                                  ctx_->compute_stream(), x.rows == 1 ? w.dp4a_rows_one : w.dp4a_rows_batch,
                                  x.rows == 1 ? w.dp4a_blocks_one : 0));
  *done = true;
  return ok_status();
}

bool CudaBackend::mma_applies(const Weight& w, int64_t rows) const {
  if (!integer_gemv_ || rows < 1 || w.shape.size() != 2 || !kernels::gemm_q8_mma_applies(w.format, w.view()))
    return false;
  // set_mma_gemm / QRT_CUDA_MMA decide for every weight; else launch tuning's measurement for this one, if any (the
  // batches above kernels::kMmaMaxBatch, prompts, run in chunks of it and follow the choice timed at kTallRows).
  if (mma_mode_ != MmaMode::kTuned) return mma_mode_ == MmaMode::kOn && rows >= mma_min_rows_;
  if (rows == 1) return false;
  return rows <= kernels::kGemvMaxBatch ? w.mma_several : rows <= kMmaWideRows ? w.mma_wide : w.mma_tall;
}

// Batches above kernels::kMmaMaxBatch rows (the activation buffers' size) are taken in chunks of that many rows, each
// quantized, rearranged and multiplied in turn: W is read once per chunk (from L2 where it fits), x's quantization
// is not kept across chunks.
Status CudaBackend::linear_mma(const Weight& w, ConstF32View x, F32View y, bool* done) {
  *done = false;
  const quant::QuantView view = w.view();
  const int64_t chunk = std::min<int64_t>(x.rows, kernels::kMmaMaxBatch);
  if (kernels::q8_activation_bytes(chunk, view.cols) > q8_bytes_ ||
      kernels::q8_mma_tile_bytes(chunk, view.cols) > mma_tiles_bytes_)
    return ok_status();  // buffers sized before set_mma_gemm: the other kernels
  for (int64_t r0 = 0; r0 < x.rows; r0 += chunk) {
    const int64_t rows = std::min(chunk, x.rows - r0);
    QRT_ASSIGN_OR_RETURN(const kernels::Q8Activations q, quantized_input(x.row_range(r0, rows), view.cols));
    if (!mma_tiles_ready_) {
      QRT_TRY(kernels::q8_to_mma_tiles({q.codes, q.scales}, rows, view.cols, mma_tiles_, ctx_->compute_stream()));
      mma_tiles_ready_ = true;
    }
    QRT_TRY(kernels::gemm_q8_mma(w.format, view, mma_tiles_, static_cast<int>(rows), y.data + r0 * y.cols,
                                 ctx_->compute_stream()));
  }
  *done = true;
  return ok_status();
}

Result<kernels::Q8Activations> CudaBackend::quantized_input(ConstF32View x, int64_t cols) {
  if (kernels::q8_activation_bytes(x.rows, cols) > q8_bytes_)
    return internal_error("quantized_input: the activation buffer holds fewer than " + std::to_string(x.rows) +
                          " rows of " + std::to_string(cols));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8_buffer_, x.rows, cols);
  if (x.data != q8_source_ || x.rows != q8_source_rows_ || cols != q8_source_cols_) {
    forget_q8_source();
    QRT_TRY(kernels::quantize_q8_activations(x.data, x.rows, cols, q, ctx_->compute_stream()));
    remember_q8_source(x);
  }
  return q;
}

// y[n, out] = x[n, in] · Wᵀ for n > 8, on the tensor cores: x is rounded to fp16 once, W is dequantized to fp16
// tile by tile (rows [r0, r0 + tile) of W) and multiplied with cublasGemmEx, accumulating and writing in fp32.
// Every call is on the compute stream, so a tile is not overwritten before the GEMM reading it has run. In cuBLAS's
// column-major terms the row-major y is C[out, n] (ldc = out), the row-major W tile is Aᵀ with A[in, tile]
// (lda = in), and x is B[in, n] (ldb = in): C[r0:r0+tile, :] = Aᵀ · B.
// fp16 rather than bf16: its 11-bit mantissa keeps the product within about 1e-3 of fp32 (bf16's 8 bits give
// several times that); activations beyond fp16's range (65504) would overflow, as in llama.cpp's fp16 path.
Status CudaBackend::linear_gemm(const Weight& w, ConstF32View x, F32View y) {
  const quant::QuantView view = w.view();
  const int64_t out = view.rows, in = view.cols, n = x.rows;
  if (out > INT_MAX || in > INT_MAX || n > INT_MAX)
    return unsupported("linear: [" + std::to_string(n) + ", " + std::to_string(in) + "] · [" + std::to_string(out) +
                       ", " + std::to_string(in) + "]ᵀ exceeds cuBLAS's 32-bit dimensions");
  const uint64_t row_bytes = static_cast<uint64_t>(in) * sizeof(__half);
  const float alpha = 1.0f, beta = 0.0f;
  if (w.half != nullptr) {
    // The fp16 copy made at upload: one GEMM over every row.
    QRT_ASSIGN_OR_RETURN(float* scratch, dequant_scratch(static_cast<uint64_t>(n) * row_bytes));
    auto* x_half = reinterpret_cast<__half*>(scratch);
    QRT_TRY(kernels::to_half(x.data, n * in, x_half, ctx_->compute_stream()));
    QRT_CUBLAS_TRY(cublasGemmEx(ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(n),
                                static_cast<int>(in), &alpha, w.half, CUDA_R_16F, static_cast<int>(in), x_half,
                                CUDA_R_16F, static_cast<int>(in), &beta, y.data, CUDA_R_32F, static_cast<int>(out),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return ok_status();
  }
  int64_t tile = static_cast<int64_t>(gemm_tile_bytes_ / row_bytes);
  if (tile < 1) tile = 1;
  if (tile > out) tile = out;
  const uint64_t x_bytes = align_up(static_cast<uint64_t>(n) * row_bytes, kPartAlignment);
  QRT_ASSIGN_OR_RETURN(float* scratch, dequant_scratch(x_bytes + static_cast<uint64_t>(tile) * row_bytes));
  auto* x_half = reinterpret_cast<__half*>(scratch);
  auto* w_half = reinterpret_cast<__half*>(reinterpret_cast<uint8_t*>(scratch) + x_bytes);
  const cudaStream_t stream = ctx_->compute_stream();
  QRT_TRY(kernels::to_half(x.data, n * in, x_half, stream));
  for (int64_t r0 = 0; r0 < out; r0 += tile) {
    const int64_t rows = out - r0 < tile ? out - r0 : tile;
    QRT_TRY(kernels::dequantize_rows_half(w.format, view, r0, rows, w_half, stream));
    QRT_CUBLAS_TRY(cublasGemmEx(ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                static_cast<int>(in), &alpha, w_half, CUDA_R_16F, static_cast<int>(in), x_half,
                                CUDA_R_16F, static_cast<int>(in), &beta, y.data + r0, CUDA_R_32F,
                                static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return ok_status();
}

Status CudaBackend::linear_experts(ConstF32View x, WeightHandle weight, ConstI32View ids, F32View y) {
  const char* op = "linear_experts";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  QRT_TRY(op_checks::linear_experts(x, WeightInfo{w->format, w->shape}, ids, y));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(y, op, "y"));
  if (w->shape[0] > INT_MAX || ids.cols > INT_MAX)
    return unsupported("linear_experts: " + std::to_string(w->shape[0]) + " experts / top_k " +
                       std::to_string(ids.cols) + " exceed 32 bits");
  if (ids.rows == 0) return ok_status();
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::ExpertGemvShape shape{ids.rows, static_cast<int>(ids.cols), static_cast<int>(w->shape[0]),
                                       x.rows == ids.rows};
  // Integer dot products on x quantized once (gate and up share the quantization, as the dense projections do; the
  // norm's fused quantization is used when x is its output). One token (a decode step): each slot on its own, its
  // experts being distinct. Several: slots grouped by expert, so that an expert's rows are read once per batch; a
  // slot's sum is taken the same way either way, so each sequence of a batch gets the bits it gets alone.
  const quant::QuantView expert0 = w->first_matrix_view();
  const bool dp4a = integer_gemv_ && kernels::expert_gemv_dp4a_applies(w->format, expert0, w->matrix_parts);
  const bool fits = kernels::q8_activation_bytes(x.rows, x.cols) <= q8_bytes_;
  if (dp4a && ids.rows == 1 && fits) {
    QRT_ASSIGN_OR_RETURN(const kernels::Q8Activations q, quantized_input(x, x.cols));
    QRT_TRY(kernels::expert_gemv_dp4a(w->format, expert0, w->matrix_parts, ids.data, shape, {q.codes, q.scales},
                                      y.data, ctx_->compute_stream()));
    return finish_linear(nullptr, y);
  }
  if (integer_gemv_ && shape.experts <= kernels::kGroupedMaxExperts) {
    // A prompt or a batch of 64 slots or more (8 sequences routed to 8 experts each): the tensor cores (one weight
    // load for up to 32 slots); else the grouped integer-dot kernel. QRT_CUDA_MMA=1|0 decides for every batch. A
    // format with a tensor-core policy but no integer-dot one (AFQ2/3/5/6) takes the tensor cores or the staged one.
    const int64_t slots = ids.rows * ids.cols;
    const bool many_slots = slots >= std::min(kMmaMinSlotsPerExpert * shape.experts, kMmaMinSlots);
    const bool mma = mma_mode_ != MmaMode::kOff && (mma_mode_ == MmaMode::kOn || many_slots) &&
                     kernels::expert_gemm_mma_applies(w->format, expert0, w->matrix_parts, shape);
    if (mma || dp4a) {
      // The slot lists (and for the tensor cores the chunk table and gathered tiles), then, for x wider than the
      // decode buffer (a prompt's tokens, a batch's slots), x's quantization.
      const uint64_t work = mma ? kernels::expert_gemm_mma_workspace_bytes(w->format, shape, x.cols)
                                : kernels::expert_gemv_grouped_workspace_bytes(shape);
      const uint64_t lists = (work + 255) / 256 * 256;
      QRT_ASSIGN_OR_RETURN(float* scratch,
                           dequant_scratch(lists + (fits ? 0 : kernels::q8_activation_bytes(x.rows, x.cols))));
      kernels::Q8Activations q;
      if (fits) {
        QRT_ASSIGN_OR_RETURN(q, quantized_input(x, x.cols));
      } else {
        forget_q8_source();
        q = kernels::q8_activations_at(reinterpret_cast<uint8_t*>(scratch) + lists, x.rows, x.cols);
        QRT_TRY(kernels::quantize_q8_activations(x.data, x.rows, x.cols, q, ctx_->compute_stream()));
      }
      if (mma) {
        QRT_TRY(kernels::expert_gemm_mma_grouped(w->format, expert0, w->matrix_parts, ids.data, shape,
                                                 {q.codes, q.scales}, y.data, scratch, ctx_->compute_stream()));
      } else {
        QRT_TRY(kernels::expert_gemv_dp4a_grouped(w->format, expert0, w->matrix_parts, ids.data, shape,
                                                  {q.codes, q.scales}, y.data, scratch, ctx_->compute_stream()));
      }
      return finish_linear(nullptr, y);
    }
  }
  forget_q8_source();
  // The formats without an integer-dot kernel (FP8, MXFP8, BF16, ... experts; MXFP4, NVFP4 with the float GEMV chosen)
  // on the dense model's staged kernel: one token's slots each on their own, several tokens grouped by expert (the
  // same bits either way).
  if (kernels::expert_gemv_staged_applies(w->format, expert0, w->matrix_parts, x.data)) {
    if (ids.rows == 1)
      return kernels::expert_gemv_staged(w->format, expert0, w->matrix_parts, ids.data, shape, x.data, y.data,
                                         ctx_->compute_stream());
    if (shape.experts <= kernels::kGroupedMaxExperts) {
      QRT_ASSIGN_OR_RETURN(float* workspace, dequant_scratch(kernels::expert_gemv_grouped_workspace_bytes(shape)));
      return kernels::expert_gemv_staged_grouped(w->format, expert0, w->matrix_parts, ids.data, shape, x.data,
                                                 y.data, workspace, ctx_->compute_stream());
    }
  }
  // The others (HQQ, F8Q8, the GGML formats with the float GEMV chosen): the generic kernels, grouped likewise.
  if (ids.rows > 1 && shape.experts <= kernels::kGroupedMaxExperts) {
    QRT_ASSIGN_OR_RETURN(float* workspace, dequant_scratch(kernels::expert_gemv_grouped_workspace_bytes(shape)));
    return kernels::expert_gemv_grouped(w->format, w->first_matrix_view(), w->matrix_parts, ids.data, shape, x.data,
                                        y.data, workspace, ctx_->compute_stream());
  }
  return kernels::expert_gemv(w->format, w->first_matrix_view(), w->matrix_parts, ids.data, shape, x.data, y.data,
                              ctx_->compute_stream());
}

}  // namespace qrt
