// CPU dequantization throughput per format (the reference path: it is an oracle, not a fast path, but its speed
// bounds how large the tests can be).
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "bench_inputs.hpp"
#include "kernels/cpu/quant_reference.hpp"

namespace {
using namespace qrt::quant;

void BM_Dequantize(benchmark::State& state, FormatId id) {
  const int64_t rows = 256, cols = 4096;
  const QuantParams p = qrt::bench::bench_params(id, ScalarType::kF16);
  const std::vector<float> x = qrt::bench::gaussian_matrix(rows, cols, 1, 1.0f);
  auto q = qrt::cpu::quantize(id, x.data(), rows, cols, p);
  if (!q.ok()) {
    state.SkipWithError(q.status().to_string().c_str());
    return;
  }
  const QuantView v = qrt::cpu::view_of(*q, rows, cols, p);
  std::vector<float> out(rows * cols);
  for (auto _ : state) {
    (void)qrt::cpu::dequantize(id, v, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q->data.size() + q->scales.size() + q->biases.size()));
}

const bool registered = [] {
  for (FormatId id : kAllFormats) {
    if (!format_info(id).has_quantizer) continue;
    benchmark::RegisterBenchmark(("dequantize/" + std::string(format_name(id))).c_str(), BM_Dequantize, id)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
