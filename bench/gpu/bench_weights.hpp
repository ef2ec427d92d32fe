// Weights for the decode-shaped kernel benchmarks: real quantizer output (a [256, cols] tile quantized on the CPU and
// repeated down the rows on the device: distinct addresses, while CPU quantization of full 8B-sized matrices would
// take minutes), in as many device copies as make three times the L2 size, used in turn so that no run finds its
// weights in L2 (a 4-bit 4096x14336 matrix is 33 MB, an H100's L2 50 MB).
#pragma once

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gpu_bench_util.hpp"
#include "kernels/cpu/quant_reference.hpp"

namespace qrt::bench {

constexpr int64_t kTileRows = 256;

inline quant::QuantParams bench_params(const quant::FormatInfo& info) {
  quant::QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = quant::ScalarType::kBF16;
  return p;
}

inline const quant::QuantBuffers* host_tile(quant::FormatId id, int64_t cols) {
  static std::map<std::pair<quant::FormatId, int64_t>, quant::QuantBuffers> cache;
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
inline const uint8_t* upload_tiled(const std::vector<uint8_t>& part, int64_t reps, DeviceBuffer& dst) {
  if (part.empty()) return nullptr;
  dst = DeviceBuffer(part.size() * reps);
  for (int64_t r = 0; r < reps; ++r)
    QRT_BENCH_CUDA(cudaMemcpy(dst.as<uint8_t>() + r * part.size(), part.data(), part.size(), cudaMemcpyHostToDevice));
  return dst.as<uint8_t>();
}

inline int64_t l2_bytes() {
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
  quant::QuantView view;
};

// Copies of a [rows, cols] matrix in `id` (rows a multiple of kTileRows), and the bytes of one.
struct BenchWeights {
  std::vector<WeightCopy> copies;
  int64_t weight_bytes = 0;
};
// Empty copies when the quantizer rejects the shape.
inline BenchWeights bench_weights(quant::FormatId id, int64_t rows, int64_t cols) {
  using namespace qrt::quant;
  BenchWeights out;
  const QuantBuffers* tile = host_tile(id, cols);
  if (!tile) return out;
  const FormatInfo info = format_info(id);
  const QuantView host_view = cpu::view_of(*tile, rows, cols, bench_params(info));
  const int64_t weight_bytes = out.weight_bytes =
      static_cast<int64_t>(tile->data.size() + tile->scales.size() + tile->biases.size()) * (rows / kTileRows);
  const int64_t copies = std::clamp<int64_t>((3 * l2_bytes() + weight_bytes - 1) / weight_bytes, 1, 64);
  std::vector<WeightCopy>& weights = out.copies;
  weights.resize(static_cast<size_t>(copies));
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
  return out;
}

// Times run(view) over the copies in turn (each run finds its weights out of L2); false, with the benchmark marked
// skipped, when the first run fails.
template <class Run>
bool time_over_copies(benchmark::State& state, const BenchWeights& bw, Run&& run) {
  const Status first = run(bw.copies[0].view);
  if (!first.ok()) {
    state.SkipWithError(first.to_string().c_str());
    return false;
  }
  size_t next = 0;
  time_with_events(state, nullptr, [&] {
    (void)run(bw.copies[next].view);
    next = next + 1 == bw.copies.size() ? 0 : next + 1;
  });
  return true;
}

}  // namespace qrt::bench
