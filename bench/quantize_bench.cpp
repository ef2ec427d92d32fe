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
// weighted: with per-column importance (log-normal, like an imatrix's mean squared activations), as
// quantize-model --imatrix runs the GGML quantizers that read one.
void BM_Quantize(benchmark::State& state, FormatId id, bool weighted) {
  const int64_t rows = 256, cols = 4096;
  QuantParams p = qrt::bench::bench_params(id, ScalarType::kBF16);
  const std::vector<float> x = qrt::bench::gaussian_matrix(rows, cols, 2, 0.02f);
  std::vector<float> importance(static_cast<size_t>(cols));
  std::mt19937 rng(3);
  std::lognormal_distribution<float> lognormal(0.0f, 1.5f);
  for (float& w : importance) w = lognormal(rng);
  if (weighted) p.importance = importance.data();
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
    benchmark::RegisterBenchmark(("quantize/" + std::string(format_name(id))).c_str(), BM_Quantize, id, false)
        ->Unit(benchmark::kMillisecond);
  }
  // The formats whose ggml quantizer reads an importance matrix (the others ignore it).
  for (FormatId id : {FormatId::kQ4_0, FormatId::kQ4_1, FormatId::kQ5_0, FormatId::kQ5_1, FormatId::kQ2_K,
                      FormatId::kQ3_K, FormatId::kQ4_K, FormatId::kQ5_K, FormatId::kQ6_K, FormatId::kIQ4_NL,
                      FormatId::kIQ4_XS, FormatId::kIQ2_XXS, FormatId::kIQ2_XS, FormatId::kIQ2_S, FormatId::kIQ3_XXS,
                      FormatId::kIQ3_S, FormatId::kIQ1_S, FormatId::kIQ1_M})
    benchmark::RegisterBenchmark(("quantize_imatrix/" + std::string(format_name(id))).c_str(), BM_Quantize, id,
                                 true)
        ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
