// W → fp16, the prefill path's dequantization before cuBLAS (CudaBackend::linear_gemm, a tile of up to 64 MiB of fp16
// rows at a time), at the 8B gate/up shape, on real quantizer output never in L2 (bench_weights.hpp): for the formats
// with a tensor-core policy, its kernel (what dequantize_rows_half takes for them) against the generic one (the
// traits' decode staged in shared memory, which it took before); for BF16, FP8 and AFQ4 (groups of 64, BF16 scales),
// the generic kernel's chunks of eight elements (it took one element per thread, or a whole group per lane in shared
// memory, before). Bytes are the packed weights read plus 2 per weight
// written; pct_of_copy_bw compares them with the measured copy bandwidth (read + write), the pace a dequantization
// can reach.
#include <string>

#include "bench_weights.hpp"
#include "kernels/linear/dequant.hpp"

namespace qrt::bench {
namespace {
using namespace qrt::quant;

void BM_DequantHalf(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, bool generic) {
  BenchWeights bw = bench_weights(id, rows, cols);
  if (bw.copies.empty()) {
    state.SkipWithError("quantizer rejected the shape");
    return;
  }
  DeviceBuffer out(static_cast<size_t>(rows * cols) * 2);
  auto run = [&](const QuantView& w) {
    return generic ? kernels::dequantize_rows_half_generic(id, w, 0, rows, out.as<__half>(), nullptr)
                   : kernels::dequantize_rows_half_by_policy(id, w, 0, rows, out.as<__half>(), nullptr);
  };
  if (!time_over_copies(state, bw, run)) return;
  const double bytes = static_cast<double>(bw.weight_bytes) + 2.0 * static_cast<double>(rows * cols);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetLabel(generic ? "generic" : "policy");
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
}

const bool registered = [] {
  for (FormatId id : {FormatId::kQ4_K, FormatId::kQ6_K, FormatId::kQ8_0, FormatId::kQ4_0, FormatId::kIQ4_XS,
                      FormatId::kMXFP4, FormatId::kIQ2_XXS, FormatId::kIQ3_S}) {
    const std::string shape = std::string(format_name(id)) + "/14336x4096";
    for (bool generic : {false, true})
      benchmark::RegisterBenchmark(("dequant_half/" + shape + (generic ? "/generic" : "/policy")).c_str(),
                                   BM_DequantHalf, id, 14336, 4096, generic)
          ->UseManualTime()
          ->MinTime(0.05)
          ->Unit(benchmark::kMicrosecond);
  }
  for (FormatId id : {FormatId::kBF16, FormatId::kFP8, FormatId::kAFQ4})
    benchmark::RegisterBenchmark(("dequant_half/" + std::string(format_name(id)) + "/14336x4096/generic").c_str(),
                                 BM_DequantHalf, id, 14336, 4096, true)
        ->UseManualTime()
        ->MinTime(0.05)
        ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace qrt::bench
