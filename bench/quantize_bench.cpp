// CPU quantization throughput per format: the reference quantizers quantize-model runs (one thread each; the tool
// spreads tensors over its threads). Bytes processed are the f32 input, so GB/s says how fast a checkpoint's weights
// go through. Part of qrt_cpu_bench (dequant_bench.cpp holds the main). See bench/NOTES-quantize.md.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench_inputs.hpp"
#include "kernels/cpu/quant_reference.hpp"

namespace {
using namespace qrt::quant;

// A [256, 4096] Gaussian matrix: one slab of an 8B model's 4096-wide projections.
void BM_Quantize(benchmark::State& state, FormatId id) {
  const int64_t rows = 256, cols = 4096;
  const QuantParams p = qrt::bench::bench_params(id, ScalarType::kBF16);
  const std::vector<float> x = qrt::bench::gaussian_matrix(rows, cols, 2, 0.02f);
  for (auto _ : state) {
    auto q = qrt::cpu::quantize(id, x.data(), rows, cols, p);
    if (!q.ok()) {
      state.SkipWithError(q.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize(q->data.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
  state.SetBytesProcessed(state.iterations() * rows * cols * static_cast<int64_t>(sizeof(float)));
}

const bool registered = [] {
  for (FormatId id : kAllFormats) {
    if (!format_info(id).has_quantizer) continue;
    benchmark::RegisterBenchmark(("quantize/" + std::string(format_name(id))).c_str(), BM_Quantize, id)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
