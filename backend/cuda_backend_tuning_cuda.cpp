// Launch tuning: the CUDA backend times a kernel's work splits on the device where no rule picks the best one for
// every GPU and shape, once per shape, and keeps the fastest. Today that is the integer-dot GEMV's rows per block:
// more rows keep more bytes in flight per block and read x once for more rows, fewer give more blocks, and which
// wins depends on the matrix, the batch and the card (bench/NOTES-gemv.md). Every candidate gives the same sums bit
// for bit, so tuning changes speed only.
#include <algorithm>
#include <string>

#include "backend/cuda_backend.hpp"
#include "backend/cuda_backend_weight.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/linear/gemv_dp4a.hpp"

namespace qrt {
namespace {

constexpr int kWarmups = 2;
constexpr int kTimedRuns = 5;

// Destroys the two events however the timing ends.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

std::pair<int, int> CudaBackend::tuned_dp4a_rows(WeightHandle weight) const {
  auto w = find_weight(weight, "tuned_dp4a_rows", "weight");
  if (!w.ok()) return {0, 0};
  return {(*w)->dp4a_rows_one, (*w)->dp4a_rows_batch};
}

Status CudaBackend::tune_dp4a_rows(Weight& w) {
  const quant::QuantView view = w.view();
  const auto key = std::make_tuple(static_cast<int>(w.format), view.rows, view.cols);
  if (auto it = dp4a_rows_tuned_.find(key); it != dp4a_rows_tuned_.end()) {
    std::tie(w.dp4a_rows_one, w.dp4a_rows_batch) = it->second;
    return ok_status();
  }
  const int batch = kernels::kGemvMaxBatch;
  if (kernels::q8_activation_bytes(batch, view.cols) > q8_bytes_) return ok_status();  // not reserved: untuned
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  // x: zeros (the kernels' speed does not depend on the values), which replaces whatever quantization the buffer held.
  forget_q8_source();
  QRT_CUDA_TRY(cudaMemsetAsync(q8_buffer_, 0, kernels::q8_activation_bytes(batch, view.cols), stream));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8_buffer_, batch, view.cols);
  QRT_ASSIGN_OR_RETURN(float* y, dequant_scratch(static_cast<uint64_t>(batch) * view.rows * sizeof(float)));
  EventPair ev;
  QRT_CUDA_TRY(cudaEventCreate(&ev.start));
  QRT_CUDA_TRY(cudaEventCreate(&ev.stop));
  // The mean time of kTimedRuns launches after kWarmups, in ms.
  const auto time = [&](int m, int rows_per_block, float* ms) -> Status {
    const auto run = [&] {
      return kernels::gemv_dp4a_rows(w.format, view, {q.codes, q.scales}, m, y, stream, rows_per_block);
    };
    for (int i = 0; i < kWarmups; ++i) QRT_TRY(run());
    QRT_CUDA_TRY(cudaEventRecord(ev.start, stream));
    for (int i = 0; i < kTimedRuns; ++i) QRT_TRY(run());
    QRT_CUDA_TRY(cudaEventRecord(ev.stop, stream));
    QRT_CUDA_TRY(cudaEventSynchronize(ev.stop));
    QRT_CUDA_TRY(cudaEventElapsedTime(ms, ev.start, ev.stop));
    return ok_status();
  };
  const auto fastest = [&](int m, std::initializer_list<int> candidates, int* best) -> Status {
    float best_ms = 0.0f;
    for (const int r : candidates) {
      float ms = 0.0f;
      QRT_TRY(time(m, r, &ms));
      if (*best == 0 || ms < best_ms) {
        *best = r;
        best_ms = ms;
      }
    }
    return ok_status();
  };
  int one = 0, several = 0;
  const std::string what = "launch tuning of the integer-dot GEMV for " + std::string(quant::format_name(w.format)) +
                           " [" + std::to_string(view.rows) + ", " + std::to_string(view.cols) + "]";
  QRT_TRY(fastest(1, {1, 2, 4}, &one).with_context(what));
  QRT_TRY(fastest(batch, {1, 2}, &several).with_context(what));
  w.dp4a_rows_one = one;
  w.dp4a_rows_batch = several;
  dp4a_rows_tuned_[key] = {one, several};
  return ok_status();
}

}  // namespace qrt
