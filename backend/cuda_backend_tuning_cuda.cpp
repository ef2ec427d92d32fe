// Launch tuning: the CUDA backend times the kernels and work splits that no rule ranks the same on every GPU and
// shape, once per weight shape at upload, and keeps the fastest (bench/NOTES-gemv.md, "Launch tuning"):
//   - the integer-dot GEMV's rows per block, for one x row (1, 2, 4, 8) and for several (1, 2, timed at 8): more rows
//     keep more bytes in flight per block and read x once for more rows (x's loads, not W's, are most of the
//     kernel's L1 traffic), fewer give more blocks; every candidate gives the same sums bit for bit;
//   - for one x row, then a looping grid of 4, 8, 16 or 32 blocks per SM against a block per row group (the H200 showed
//     the one-row kernel at about 40% of the copy bandwidth with each block ending after one round of loads);
//   - where the int8 tensor-core GEMM takes the format (and set_mma_gemm has not decided for every weight): it against
//     the GEMV for 2..8 rows (timed at 8; the float GEMV for AFQ2/3/5/6, which have no integer-dot kernel), and
//     against the fused or cuBLAS GEMM for 9..64 rows (timed at 32) and for 65 rows and more (timed at 128: the
//     tensor-core GEMM's time grows with the rows, the dequantization before cuBLAS does not; prompts above 256 rows
//     run on it in chunks of 256, so its time per row stays that of 128-256 rows). These round differently (all
//     within the integer-dot tolerance of the fp32 product), so a weight's batch sizes keep whichever path their
//     bucket chose.
// The inputs are zeros: the kernels' speed does not depend on the values.
#include <climits>
#include <string>

#include "backend/cuda_backend.hpp"
#include "backend/cuda_backend_weight.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_dp4a.hpp"

namespace qrt {
namespace {

#if defined(QRT_SIMT)
// The SIMT layer's timings are the CPU's and mean nothing (its tests check the choices' legality and routing): one
// run per candidate.
constexpr int kWarmups = 0;
constexpr int kTimedRuns = 1;
#else
constexpr int kWarmups = 2;
constexpr int kTimedRuns = 5;
#endif
constexpr int kWideRows = 32;    // the batch the tensor-core GEMM and the wide GEMMs are compared at for 9..64 rows
constexpr int kTallRows = 128;   // and for 65 and more

// Destroys the two events however the timing ends.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

CudaBackend::TunedLinear CudaBackend::tuned_linear(WeightHandle weight) const {
  auto w = find_weight(weight, "tuned_linear", "weight");
  if (!w.ok()) return {};
  return {(*w)->dp4a_rows_one, (*w)->dp4a_rows_batch, (*w)->dp4a_blocks_one,
          (*w)->mma_several,   (*w)->mma_wide,        (*w)->mma_tall};
}

Status CudaBackend::set_tuned_linear(WeightHandle weight, const TunedLinear& c) {
  QRT_TRY(find_weight(weight, "set_tuned_linear", "weight").status());
  Weight& w = *weights_[weight.id - 1];  // find_weight checked the handle
  if ((c.dp4a_rows_one != 0 && c.dp4a_rows_one != 1 && c.dp4a_rows_one != 2 && c.dp4a_rows_one != 4 &&
       c.dp4a_rows_one != 8) ||
      (c.dp4a_rows_batch != 0 && c.dp4a_rows_batch != 1 && c.dp4a_rows_batch != 2))
    return invalid_argument("set_tuned_linear: rows per block " + std::to_string(c.dp4a_rows_one) + " / " +
                            std::to_string(c.dp4a_rows_batch) +
                            " (0, 1, 2, 4 or 8 for one row; 0, 1 or 2 for several)");
  if (c.dp4a_blocks_one < 0 || c.dp4a_blocks_one > INT_MAX)
    return invalid_argument("set_tuned_linear: at most " + std::to_string(c.dp4a_blocks_one) +
                            " blocks for one row (0 for one per row group)");
  if ((c.mma_several || c.mma_wide || c.mma_tall) &&
      (w.shape.size() != 2 || !kernels::gemm_q8_mma_applies(w.format, w.view()) || !mma_buffers()))
    return invalid_argument("set_tuned_linear: no tensor-core GEMM for this weight (" +
                            std::string(quant::format_name(w.format)) + ", or its buffers were not reserved)");
  w.dp4a_rows_one = c.dp4a_rows_one;
  w.dp4a_rows_batch = c.dp4a_rows_batch;
  w.dp4a_blocks_one = c.dp4a_blocks_one;
  w.mma_several = c.mma_several;
  w.mma_wide = c.mma_wide;
  w.mma_tall = c.mma_tall;
  return ok_status();
}

Status CudaBackend::tune_linear(Weight& w) {
  const quant::QuantView view = w.view();
  const auto key = std::make_tuple(static_cast<int>(w.format), view.rows, view.cols);
  const auto apply = [&w](const TunedLinear& t) {
    w.dp4a_rows_one = t.dp4a_rows_one;
    w.dp4a_rows_batch = t.dp4a_rows_batch;
    w.dp4a_blocks_one = t.dp4a_blocks_one;
    w.mma_several = t.mma_several;
    w.mma_wide = t.mma_wide;
    w.mma_tall = t.mma_tall;
  };
  if (auto it = linear_tuned_.find(key); it != linear_tuned_.end()) {
    apply(it->second);
    return ok_status();
  }
  const int batch = kernels::kGemvMaxBatch;
  const bool dp4a = kernels::gemv_dp4a_applies(w.format, view);
  const bool mma = mma_mode_ == MmaMode::kTuned && kernels::gemm_q8_mma_applies(w.format, view) &&
                   kernels::q8_activation_bytes(kTallRows, view.cols) <= q8_bytes_ &&
                   kernels::q8_mma_tile_bytes(kTallRows, view.cols) <= mma_tiles_bytes_;
  if (!dp4a && !mma) return ok_status();  // nothing to choose
  if (kernels::q8_activation_bytes(batch, view.cols) > q8_bytes_) return ok_status();  // not reserved: untuned
  const std::string what = "launch tuning for " + std::string(quant::format_name(w.format)) + " [" +
                           std::to_string(view.rows) + ", " + std::to_string(view.cols) + "]";
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const cudaStream_t stream = ctx_->compute_stream();
  // x (fp32 and quantized, and rearranged for the tensor cores) and y for kTallRows rows, zeros; the quantized x
  // replaces whatever the decode buffer held.
  forget_q8_source();
  const int64_t x_rows = mma ? kTallRows : batch;
  QRT_ASSIGN_OR_RETURN(ScopedBuffer x, allocate_scoped(*this, static_cast<uint64_t>(x_rows) * view.cols * 4));
  QRT_ASSIGN_OR_RETURN(ScopedBuffer y, allocate_scoped(*this, static_cast<uint64_t>(x_rows) * view.rows * 4));
  QRT_CUDA_TRY(cudaMemsetAsync(x.buffer().ptr, 0, x.buffer().bytes, stream));
  QRT_CUDA_TRY(cudaMemsetAsync(q8_buffer_, 0, kernels::q8_activation_bytes(x_rows, view.cols), stream));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8_buffer_, x_rows, view.cols);
  if (mma) QRT_TRY(kernels::q8_to_mma_tiles({q.codes, q.scales}, x_rows, view.cols, mma_tiles_, stream));
  float* const yp = static_cast<float*>(y.buffer().ptr);

  EventPair ev;
  QRT_CUDA_TRY(cudaEventCreate(&ev.start));
  QRT_CUDA_TRY(cudaEventCreate(&ev.stop));
  // The mean time of kTimedRuns calls of run() after kWarmups, in ms.
  const auto time = [&](const auto& run, float* ms) -> Status {
    for (int i = 0; i < kWarmups; ++i) QRT_TRY(run());
    QRT_CUDA_TRY(cudaEventRecord(ev.start, stream));
    for (int i = 0; i < kTimedRuns; ++i) QRT_TRY(run());
    QRT_CUDA_TRY(cudaEventRecord(ev.stop, stream));
    QRT_CUDA_TRY(cudaEventSynchronize(ev.stop));
    QRT_CUDA_TRY(cudaEventElapsedTime(ms, ev.start, ev.stop));
    return ok_status();
  };
  const auto gemv = [&](int m, int rows_per_block) {
    return [&, m, rows_per_block] {
      return kernels::gemv_dp4a_rows(w.format, view, {q.codes, q.scales}, m, yp, stream, rows_per_block);
    };
  };
  // The fastest rows per block for m rows, and its time.
  const auto fastest_rows = [&](int m, std::initializer_list<int> candidates, int* best, float* best_ms) -> Status {
    for (const int r : candidates) {
      float ms = 0.0f;
      QRT_TRY(time(gemv(m, r), &ms));
      if (*best == 0 || ms < *best_ms) {
        *best = r;
        *best_ms = ms;
      }
    }
    return ok_status();
  };
  TunedLinear t;
  float one_ms = 0.0f, several_ms = 0.0f;
  if (dp4a) {
    QRT_TRY(fastest_rows(1, {1, 2, 4, 8}, &t.dp4a_rows_one, &one_ms).with_context(what));
    // Then a grid of a few looping blocks per SM at those rows per block, kept where it is faster.
    for (const int per_sm : {4, 8, 16, 32}) {  // a block is 32, 64 or 128 threads (gemv_dp4a.hpp's work split)
      const int64_t blocks = int64_t{ctx_->props().sm_count} * per_sm;
      const auto looping = [&] {
        return kernels::gemv_dp4a_rows(w.format, view, {q.codes, q.scales}, 1, yp, stream, t.dp4a_rows_one, blocks);
      };
      float ms = 0.0f;
      QRT_TRY(time(looping, &ms).with_context(what));
      if (ms < one_ms) {
        one_ms = ms;
        t.dp4a_blocks_one = blocks;
      }
    }
    QRT_TRY(fastest_rows(batch, {1, 2}, &t.dp4a_rows_batch, &several_ms).with_context(what));
  } else {
    // No integer-dot kernel: 2..8 rows otherwise take the float GEMV, as linear() would.
    const auto float_gemv = [&] {
      return kernels::gemv(w.format, view, static_cast<const float*>(x.buffer().ptr), batch, yp, stream);
    };
    QRT_TRY(time(float_gemv, &several_ms).with_context(what));
  }
  if (mma) {
    const auto tensor_cores = [&](int m) {
      return [&, m] { return kernels::gemm_q8_mma(w.format, view, mma_tiles_, m, yp, stream); };
    };
    // The tensor-core GEMM against the path linear() takes otherwise, at one batch of each bucket.
    const auto faster = [&](int m, float other_ms, bool* chosen) -> Status {
      float ms = 0.0f;
      QRT_TRY(time(tensor_cores(m), &ms).with_context(what));
      *chosen = ms < other_ms;
      return ok_status();
    };
    const auto wide_ms = [&](int m, float* ms) {
      const ConstF32View xv{static_cast<const float*>(x.buffer().ptr), m, view.cols};
      const F32View yv{yp, m, view.rows};
      return time([&] { return linear_wide(w, xv, yv); }, ms).with_context(what);
    };
    float wide = 0.0f, tall = 0.0f;
    QRT_TRY(wide_ms(kWideRows, &wide));
    QRT_TRY(wide_ms(kTallRows, &tall));
    QRT_TRY(faster(batch, several_ms, &t.mma_several));
    QRT_TRY(faster(kWideRows, wide, &t.mma_wide));
    QRT_TRY(faster(kTallRows, tall, &t.mma_tall));
  }
  apply(t);
  linear_tuned_[key] = t;
  return ok_status();
}

}  // namespace qrt
