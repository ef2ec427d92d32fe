// Decode-shaped GEMV for every format at the Llama-3-8B shapes and batch 1, 2, 4, 8: time, GB/s and the fraction of
// the measured copy bandwidth; the label names the kernel gemv() ran (the float-x kernels; the integer-dot and
// tensor-core ones are in gemm_q8_mma_bench.cpp). Weights: bench_weights.hpp (real quantizer output, never in L2).
//
// gemv_generic/<format>/... times the generic kernel on the same inputs for the formats that have a fast kernel:
// the before/after of the per-family kernels.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "bench_weights.hpp"
#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_generic.hpp"

namespace qrt::bench {
namespace {
using namespace qrt::quant;

enum class Kernel { kDispatch, kGeneric };

void BM_Gemv(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, Kernel which) {
  const int m = static_cast<int>(state.range(0));
  BenchWeights bw = bench_weights(id, rows, cols);
  if (bw.copies.empty()) {
    state.SkipWithError("quantizer rejected the shape");
    return;
  }
  const std::vector<WeightCopy>& weights = bw.copies;
  const int64_t weight_bytes = bw.weight_bytes;
  DeviceBuffer x(m * cols * 4), y(m * rows * 4);
  std::vector<float> hx(m * cols);
  std::mt19937 gen(5);
  std::normal_distribution<float> dist;
  for (float& v : hx) v = dist(gen);
  QRT_BENCH_CUDA(cudaMemcpy(x.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  auto run = [&](const QuantView& w) {
    return which == Kernel::kGeneric ? kernels::gemv_generic(id, w, x.as<float>(), m, y.as<float>(), nullptr)
                                     : kernels::gemv(id, w, x.as<float>(), m, y.as<float>(), nullptr);
  };
  const std::string kernel = which == Kernel::kGeneric
                                 ? std::string("gemv_generic")
                                 : kernels::gemv_kernel_name(id, weights[0].view, x.as<float>(), m);
  Status first = run(weights[0].view);
  if (!first.ok()) {
    state.SkipWithError(first.to_string().c_str());
    return;
  }
  size_t next = 0;
  time_with_events(state, nullptr, [&] {
    (void)run(weights[next].view);
    next = next + 1 == weights.size() ? 0 : next + 1;
  });
  const double bytes = static_cast<double>(weight_bytes) + 4.0 * m * (cols + rows);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetLabel(kernel);
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
}

bool has_fast_gemv(FormatId id) {
  return dispatch_format(id, [](auto tag) { return kernels::FastGemv<decltype(tag)::id>::kAvailable; });
}

const bool registered = [] {
  // [rows, cols] of Llama-3-8B's decode matmuls: q/o, k/v, gate/up, down.
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};
  for (Kernel which : {Kernel::kDispatch, Kernel::kGeneric}) {
    for (FormatId id : kAllFormats) {
      if (!format_info(id).has_quantizer) continue;
      if (which == Kernel::kGeneric && !has_fast_gemv(id)) continue;  // gemv/ already times the generic kernel
      for (auto [rows, cols] : shapes) {
        const std::string name = std::string(which == Kernel::kGeneric ? "gemv_generic/" : "gemv/") +
                                 std::string(format_name(id)) + "/" + std::to_string(rows) + "x" +
                                 std::to_string(cols);
        benchmark::RegisterBenchmark(name.c_str(), BM_Gemv, id, rows, cols, which)
            ->ArgName("batch")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()->MinTime(0.05)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace qrt::bench

BENCHMARK_MAIN();
