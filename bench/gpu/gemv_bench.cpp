// Decode-shaped GEMV for every format at the Llama-3-8B shapes and batch 1, 2, 4, 8: time, GB/s and the fraction of
// the measured copy bandwidth. Weights are real quantizer output: a [256, cols] tile quantized on the CPU and
// repeated down the rows on the device (distinct addresses, so no cache reuse; CPU quantization of full 8B-sized
// matrices would take minutes).
#include <map>
#include <random>
#include <string>
#include <utility>

#include "gpu_bench_util.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv.hpp"

namespace qrt::bench {
namespace {
using namespace qrt::quant;

constexpr int64_t kTileRows = 256;

QuantParams bench_params(const FormatInfo& info) {
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kBF16;
  return p;
}

const QuantBuffers* host_tile(FormatId id, int64_t cols) {
  static std::map<std::pair<FormatId, int64_t>, QuantBuffers> cache;
  auto key = std::make_pair(id, cols);
  if (auto it = cache.find(key); it != cache.end()) return &it->second;
  std::vector<float> w(kTileRows * cols);
  std::mt19937 gen(static_cast<uint32_t>(cols) + static_cast<uint32_t>(id));
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& v : w) v = dist(gen);
  auto q = cpu::quantize(id, w.data(), kTileRows, cols, bench_params(format_info(id)));
  if (!q.ok()) return nullptr;
  return &cache.emplace(key, std::move(*q)).first->second;
}

// Uploads `part` repeated rows/kTileRows times.
const uint8_t* upload_tiled(const std::vector<uint8_t>& part, int64_t reps, DeviceBuffer& dst) {
  if (part.empty()) return nullptr;
  dst = DeviceBuffer(part.size() * reps);
  for (int64_t r = 0; r < reps; ++r)
    QRT_BENCH_CUDA(cudaMemcpy(dst.as<uint8_t>() + r * part.size(), part.data(), part.size(), cudaMemcpyHostToDevice));
  return dst.as<uint8_t>();
}

void BM_Gemv(benchmark::State& state, FormatId id, int64_t rows, int64_t cols) {
  const int m = static_cast<int>(state.range(0));
  const QuantBuffers* tile = host_tile(id, cols);
  if (!tile) {
    state.SkipWithError("quantizer rejected the shape");
    return;
  }
  const FormatInfo info = format_info(id);
  DeviceBuffer data, scales, biases;
  QuantView w = cpu::view_of(*tile, rows, cols, bench_params(info));
  w.data = upload_tiled(tile->data, rows / kTileRows, data);
  w.scales = upload_tiled(tile->scales, rows / kTileRows, scales);
  w.biases = upload_tiled(tile->biases, rows / kTileRows, biases);
  DeviceBuffer x(m * cols * 4), y(m * rows * 4);
  std::vector<float> hx(m * cols);
  std::mt19937 gen(5);
  std::normal_distribution<float> dist;
  for (float& v : hx) v = dist(gen);
  QRT_BENCH_CUDA(cudaMemcpy(x.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  const std::string kernel = kernels::gemv_kernel_name(id, m);
  Status first = kernels::gemv(id, w, x.as<float>(), m, y.as<float>(), nullptr);
  if (!first.ok()) {
    state.SkipWithError(first.to_string().c_str());
    return;
  }
  time_with_events(state, nullptr, [&] { (void)kernels::gemv(id, w, x.as<float>(), m, y.as<float>(), nullptr); });
  const double bytes = static_cast<double>(data.bytes + scales.bytes + biases.bytes) + 4.0 * m * (cols + rows);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetLabel(kernel);
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
}

const bool registered = [] {
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};
  for (FormatId id : kAllFormats) {
    if (!format_info(id).has_quantizer) continue;
    for (auto [rows, cols] : shapes) {
      const std::string name = "gemv/" + std::string(format_name(id)) + "/" + std::to_string(rows) + "x" +
                               std::to_string(cols);
      benchmark::RegisterBenchmark(name.c_str(), BM_Gemv, id, rows, cols)
          ->ArgName("batch")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()->MinTime(0.05)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace qrt::bench

BENCHMARK_MAIN();
