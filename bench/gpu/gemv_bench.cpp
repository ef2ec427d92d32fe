// Decode-shaped GEMV for every format at the Llama-3-8B shapes and batch 1, 2, 4, 8: time, GB/s and the fraction of
// the measured copy bandwidth; the label names the kernel gemv() ran. Weights are real quantizer output: a
// [256, cols] tile quantized on the CPU and repeated down the rows on the device (distinct addresses; CPU
// quantization of full 8B-sized matrices would take minutes). Several copies of the weights, together at least three
// times the L2 size, are used in turn so that no run finds its weights in L2 (a 4-bit 4096x14336 matrix is 33 MB,
// an H100's L2 50 MB).
//
// gemv_generic/<format>/... times the generic kernel on the same inputs for the formats that have a fast kernel:
// the before/after of the per-family kernels.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "gpu_bench_util.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_generic.hpp"

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

int64_t l2_bytes() {
  static const int64_t bytes = [] {
    int device = 0, l2 = 0;
    QRT_BENCH_CUDA(cudaGetDevice(&device));
    QRT_BENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return static_cast<int64_t>(l2);
  }();
  return bytes;
}

// One copy of the weights' parts on the device.
struct WeightCopy {
  DeviceBuffer data, scales, biases;
  QuantView view;
};

enum class Kernel { kDispatch, kGeneric };

void BM_Gemv(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, Kernel which) {
  const int m = static_cast<int>(state.range(0));
  const QuantBuffers* tile = host_tile(id, cols);
  if (!tile) {
    state.SkipWithError("quantizer rejected the shape");
    return;
  }
  const FormatInfo info = format_info(id);
  const QuantView host_view = cpu::view_of(*tile, rows, cols, bench_params(info));
  const int64_t weight_bytes =
      static_cast<int64_t>(tile->data.size() + tile->scales.size() + tile->biases.size()) * (rows / kTileRows);
  const int64_t copies = std::clamp<int64_t>((3 * l2_bytes() + weight_bytes - 1) / weight_bytes, 1, 64);
  std::vector<WeightCopy> weights(static_cast<size_t>(copies));
  weights[0].view = host_view;
  weights[0].view.data = upload_tiled(tile->data, rows / kTileRows, weights[0].data);
  weights[0].view.scales = upload_tiled(tile->scales, rows / kTileRows, weights[0].scales);
  weights[0].view.biases = upload_tiled(tile->biases, rows / kTileRows, weights[0].biases);
  auto clone = [](const DeviceBuffer& from, DeviceBuffer& to) -> const uint8_t* {
    if (from.ptr == nullptr) return nullptr;
    to = DeviceBuffer(from.bytes);
    QRT_BENCH_CUDA(cudaMemcpy(to.ptr, from.ptr, from.bytes, cudaMemcpyDeviceToDevice));
    return to.as<uint8_t>();
  };
  for (size_t k = 1; k < weights.size(); ++k) {
    WeightCopy& c = weights[k];
    c.view = host_view;
    c.view.data = clone(weights[0].data, c.data);
    c.view.scales = clone(weights[0].scales, c.scales);
    c.view.biases = clone(weights[0].biases, c.biases);
  }
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
