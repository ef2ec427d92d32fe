// CPU dequantization throughput per format (the reference path: it is an oracle, not a fast path, but its speed
// bounds how large the tests can be).
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "kernels/cpu/quant_reference.hpp"

namespace {
using namespace qrt::quant;

void BM_Dequantize(benchmark::State& state, FormatId id) {
  const FormatInfo info = format_info(id);
  const int64_t rows = 256, cols = 4096;
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  std::vector<float> x(rows * cols);
  std::mt19937 gen(1);
  std::normal_distribution<float> dist;
  for (float& v : x) v = dist(gen);
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
