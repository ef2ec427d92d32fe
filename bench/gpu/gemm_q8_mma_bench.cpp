// The decode kernels on quantized x at the Llama-3-8B shapes, head to head per batch size: the integer-dot GEMV
// (gemv_dp4a, batches 1..8; dp4a_r4: 4 rows per block at batch 1, gemv_dp4a_rows; dp4a_loop: a looping grid of 8 blocks
// per SM at batch 1) and the int8 tensor-core GEMM (gemm_q8_mma, batches 1..256: its small-batch block up to 32 rows,
// the shared-memory one above, whose rate the tflops counter gives) against x and W to fp16 + cuBLAS
// (wide/, 32..256 rows: launch tuning's comparison above 8 rows), on Q4_K and Q8_0 weights, and at 8 and 32 rows on
// Q2_K, Q3_K, IQ4_XS, MXFP4, NVFP4, IQ2_XXS, IQ3_S, IQ1_M and AFQ4 (bench_weights.hpp: real quantizer output, never in
// L2). x is quantized (and for the tensor cores rearranged) once before timing: in a model the norms write it. Bytes
// are W + x's limbs + y, each once; pct_of_copy_bw compares them with the measured copy bandwidth. Which kernel wins at
// which batch decides CudaBackend::set_mma_gemm's default.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <random>
#include <string>

#include "bench_weights.hpp"
#include "kernels/linear/dequant.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/q8_activations.hpp"

namespace qrt::bench {
namespace {
using namespace qrt::quant;

// kWide: what the backend runs above the GEMV batch without the tensor-core GEMM (linear_gemm): x and W to fp16,
// then cuBLAS; here W in one piece (the backend's 64 MiB tiles hold every 8B projection whole but the output one).
// kDp4aLoop: one x row on a looping grid of 8 blocks per SM (gemv_dp4a_rows' max_blocks, the plan's rows per block).
enum class Kernel { kDp4a, kDp4aRows4, kDp4aLoop, kMma, kWide };

void BM_QuantizedX(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, Kernel which) {
  const int m = static_cast<int>(state.range(0));
  BenchWeights bw = bench_weights(id, rows, cols);
  if (bw.copies.empty()) {
    state.SkipWithError("quantizer rejected the shape");
    return;
  }
  DeviceBuffer x(m * cols * 4), y(m * rows * 4), q8(kernels::q8_activation_bytes(m, cols)),
      tiles(kernels::q8_mma_tile_bytes(m, cols));
  std::vector<float> hx(static_cast<size_t>(m * cols));
  std::mt19937 gen(7);
  std::normal_distribution<float> dist;
  for (float& v : hx) v = dist(gen);
  QRT_BENCH_CUDA(cudaMemcpy(x.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8.ptr, m, cols);
  Status prepared = kernels::quantize_q8_activations(x.as<float>(), m, cols, q, nullptr);
  if (prepared.ok() && which == Kernel::kMma)
    prepared = kernels::q8_to_mma_tiles({q.codes, q.scales}, m, cols, tiles.ptr, nullptr);
  if (!prepared.ok()) {
    state.SkipWithError(prepared.to_string().c_str());
    return;
  }
  int sms = 0;
  QRT_BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t loop_blocks = int64_t{8} * sms;
  DeviceBuffer x_half(which == Kernel::kWide ? m * cols * 2 : 1), w_half(which == Kernel::kWide ? rows * cols * 2 : 1);
  cublasHandle_t cublas = nullptr;
  if (which == Kernel::kWide && cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  const auto wide = [&](const QuantView& w) -> Status {
    QRT_TRY(kernels::to_half(x.as<float>(), m * cols, x_half.as<__half>(), nullptr));
    QRT_TRY(kernels::dequantize_rows_half(id, w, 0, rows, w_half.as<__half>(), nullptr));
    const float alpha = 1.0f, beta = 0.0f;
    const int r = static_cast<int>(rows), n = static_cast<int>(m), k = static_cast<int>(cols);
    if (cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, r, n, k, &alpha, w_half.ptr, CUDA_R_16F, k, x_half.ptr,
                     CUDA_R_16F, k, &beta, y.ptr, CUDA_R_32F, r, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      return internal_error("cublasGemmEx failed");
    return ok_status();
  };
  auto run = [&](const QuantView& w) {
    if (which == Kernel::kWide) return wide(w);
    if (which == Kernel::kMma) return kernels::gemm_q8_mma(id, w, tiles.ptr, m, y.as<float>(), nullptr);
    return kernels::gemv_dp4a_rows(id, w, {q.codes, q.scales}, m, y.as<float>(), nullptr,
                                   which == Kernel::kDp4aRows4 ? 4 : 0, which == Kernel::kDp4aLoop ? loop_blocks : 0);
  };
  const bool timed = time_over_copies(state, bw, run);
  if (cublas != nullptr) cublasDestroy(cublas);
  if (!timed) return;
  const double bytes = static_cast<double>(bw.weight_bytes) +
                       static_cast<double>(kernels::q8_activation_bytes(m, cols)) + 4.0 * m * rows;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  const char* label = which == Kernel::kMma ? "gemm_q8_mma" : which == Kernel::kWide ? "fp16 + cuBLAS" : "gemv_dp4a";
  state.SetLabel(which == Kernel::kDp4aRows4  ? "gemv_dp4a 4 rows"
                 : which == Kernel::kDp4aLoop ? "gemv_dp4a looping, 8 blocks per SM"
                                              : label);
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
  // Multiply-adds as two operations each, per second in units of 10^12 (the fp16 tensor-core GEMM's usual figure).
  state.counters["tflops"] =
      benchmark::Counter(2e-12 * m * rows * cols * state.iterations(), benchmark::Counter::kIsRate);
}

const bool registered = [] {
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};
  for (FormatId id : {FormatId::kQ4_K, FormatId::kQ8_0}) {
    for (auto [rows, cols] : shapes) {
      const std::string shape = std::string(format_name(id)) + "/" + std::to_string(rows) + "x" + std::to_string(cols);
      benchmark::RegisterBenchmark(("dp4a/" + shape).c_str(), BM_QuantizedX, id, rows, cols, Kernel::kDp4a)
          ->ArgName("batch")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()->MinTime(0.05)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("dp4a_r4/" + shape).c_str(), BM_QuantizedX, id, rows, cols, Kernel::kDp4aRows4)
          ->ArgName("batch")->Arg(1)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("dp4a_loop/" + shape).c_str(), BM_QuantizedX, id, rows, cols, Kernel::kDp4aLoop)
          ->ArgName("batch")->Arg(1)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("mma/" + shape).c_str(), BM_QuantizedX, id, rows, cols, Kernel::kMma)
          ->ArgName("batch")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Arg(256)
          ->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
      // Launch tuning's other side above 8 rows, at its two comparison batches and the largest.
      benchmark::RegisterBenchmark(("wide/" + shape).c_str(), BM_QuantizedX, id, rows, cols, Kernel::kWide)
          ->ArgName("batch")->Arg(32)->Arg(128)->Arg(256)->UseManualTime()->MinTime(0.05)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // The formats whose tensor-core policy came later, at one square shape: the GEMV and the GEMM at 8 rows (launch
  // tuning's comparison), the GEMM at 32 and, through its shared-memory block, 128.
  for (FormatId id : {FormatId::kQ2_K, FormatId::kQ3_K, FormatId::kIQ4_XS, FormatId::kMXFP4, FormatId::kNVFP4,
                      FormatId::kIQ2_XXS, FormatId::kIQ3_S, FormatId::kIQ1_M, FormatId::kAFQ4}) {
    const std::string shape = std::string(format_name(id)) + "/4096x4096";
    benchmark::RegisterBenchmark(("dp4a/" + shape).c_str(), BM_QuantizedX, id, 4096, 4096, Kernel::kDp4a)
        ->ArgName("batch")->Arg(8)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("mma/" + shape).c_str(), BM_QuantizedX, id, 4096, 4096, Kernel::kMma)
        ->ArgName("batch")->Arg(8)->Arg(32)->Arg(128)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace qrt::bench
