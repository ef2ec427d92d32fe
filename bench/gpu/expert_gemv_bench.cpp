// One decode step's expert projections at Qwen3-30B-A3B's shapes (128 experts of [768, 2048] gate/up and
// [2048, 768] down, 8 routed per token), head to head: the float per-slot kernel (expert_gemv, a warp per row
// decoding whole blocks) and the integer-dot one (expert_gemv_dp4a, x quantized before timing as the norm would).
// Each run routes to the next 8 experts (16 runs before one repeats, more bytes than the L2 holds), so no run finds
// its experts in L2. Bytes are the 8 experts' weights + x + y, each once; pct_of_copy_bw against the measured copy.
// Batches of 8 and 512 tokens (a decode batch, a prompt) compare the grouped kernels (BM_ExpertsBatch). The formats
// without an integer-dot kernel (MXFP4 as gpt-oss ships it, block FP8, BF16) compare the float kernels with the
// staged ones (expert_gemv_staged*), which stream each expert's rows as the dense model's GEMV does.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bench_weights.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "kernels/moe/expert_gemv.hpp"

namespace qrt::bench {
namespace {
using namespace qrt::quant;

constexpr int kExperts = 128, kTopK = 8;

// The stack as one [experts * rows, cols] matrix on the device (expert e's rows follow expert e - 1's), expert 0's
// view and one expert's part sizes; false, with the benchmark skipped, where the format cannot hold the shape.
struct ExpertStack {
  BenchWeights bw;
  QuantView expert0;
  quant::PartSizes sizes;
};
bool make_stack(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, ExpertStack* stack) {
  stack->bw = bench_weights(id, kExperts * rows, cols);
  if (stack->bw.copies.empty()) {
    state.SkipWithError("quantizer rejected the shape");
    return false;
  }
  stack->expert0 = stack->bw.copies[0].view;
  stack->expert0.rows = rows;
  auto sizes = cpu::part_sizes(id, rows, cols, bench_params(format_info(id)));
  if (!sizes.ok()) {
    state.SkipWithError(sizes.status().to_string().c_str());
    return false;
  }
  stack->sizes = *sizes;
  return true;
}

enum class Kernel { kFloat, kDp4a, kStaged, kMma };

const char* kernel_prefix(Kernel k, bool grouped) {
  switch (k) {
    case Kernel::kMma: return "experts_grouped_mma/";
    case Kernel::kDp4a: return grouped ? "experts_grouped_dp4a/" : "experts_dp4a/";
    case Kernel::kStaged: return grouped ? "experts_grouped_staged/" : "experts_staged/";
    default: return grouped ? "experts_grouped_float/" : "experts_float/";
  }
}

void BM_Experts(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, bool shared_input, Kernel kind) {
  const bool dp4a = kind == Kernel::kDp4a;
  ExpertStack stack;
  if (!make_stack(state, id, rows, cols, &stack)) return;
  const QuantView& expert0 = stack.expert0;
  const quant::PartSizes* sizes = &stack.sizes;
  const int64_t x_rows = shared_input ? 1 : kTopK;
  std::vector<int32_t> sets;  // run k routes to experts 8k .. 8k + 7 (mod 128), in a shuffled order
  std::mt19937 gen(11);
  for (int k = 0; k < kExperts / kTopK; ++k) {
    std::vector<int32_t> set;
    for (int j = 0; j < kTopK; ++j) set.push_back(k * kTopK + j);
    std::shuffle(set.begin(), set.end(), gen);
    sets.insert(sets.end(), set.begin(), set.end());
  }
  DeviceBuffer ids(sets.size() * 4), x(x_rows * cols * 4), y(kTopK * rows * 4),
      q8(kernels::q8_activation_bytes(x_rows, cols));
  QRT_BENCH_CUDA(cudaMemcpy(ids.ptr, sets.data(), sets.size() * 4, cudaMemcpyHostToDevice));
  std::vector<float> hx(static_cast<size_t>(x_rows * cols));
  std::normal_distribution<float> dist;
  for (float& v : hx) v = dist(gen);
  QRT_BENCH_CUDA(cudaMemcpy(x.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8.ptr, x_rows, cols);
  if (Status s = kernels::quantize_q8_activations(x.as<float>(), x_rows, cols, q, nullptr); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  const kernels::ExpertGemvShape shape{1, kTopK, kExperts, shared_input};
  int64_t run_index = 0;
  auto run = [&] {
    const int32_t* route = ids.as<int32_t>() + (run_index++ % (kExperts / kTopK)) * kTopK;
    if (kind == Kernel::kStaged)
      return kernels::expert_gemv_staged(id, expert0, *sizes, route, shape, x.as<float>(), y.as<float>(), nullptr);
    return dp4a ? kernels::expert_gemv_dp4a(id, expert0, *sizes, route, shape, {q.codes, q.scales}, y.as<float>(),
                                            nullptr)
                : kernels::expert_gemv(id, expert0, *sizes, route, shape, x.as<float>(), y.as<float>(), nullptr);
  };
  if (Status s = run(); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  time_with_events(state, nullptr, [&] { (void)run(); });
  const double bytes = static_cast<double>(kTopK) * static_cast<double>(sizes->data + sizes->scales + sizes->biases) +
                       (dp4a ? static_cast<double>(kernels::q8_activation_bytes(x_rows, cols)) : 4.0 * x_rows * cols) +
                       4.0 * kTopK * rows;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetLabel(dp4a ? "expert_gemv_dp4a" : kind == Kernel::kStaged ? "expert_gemv_staged" : "expert_gemv (float)");
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
}

// A batch of tokens at the same shapes, grouped by expert: the float kernel (expert_gemv_grouped) against the
// integer-dot one (expert_gemv_dp4a_grouped) and the int8 tensor-core one (expert_gemm_mma_grouped, Q4_K and Q8_0),
// x quantized before timing, each including its slot-sorting (and chunking, gathering) kernels.
// Each token routes to 8 distinct experts drawn at random; the runs cycle through 4 such routings so that a run
// does not find the last one's experts in L2. Bytes: each routing's distinct experts once, x and y once, averaged.
void BM_ExpertsBatch(benchmark::State& state, FormatId id, int64_t rows, int64_t cols, bool shared_input,
                     int64_t tokens, Kernel kind) {
  const bool dp4a = kind == Kernel::kDp4a || kind == Kernel::kMma;  // x quantized
  ExpertStack stack;
  if (!make_stack(state, id, rows, cols, &stack)) return;
  const QuantView& expert0 = stack.expert0;
  const quant::PartSizes* sizes = &stack.sizes;
  constexpr int kRoutings = 4;
  const int64_t slots = tokens * kTopK, x_rows = shared_input ? tokens : slots;
  std::vector<int32_t> routes;
  std::mt19937 gen(12);
  double distinct = 0.0;
  for (int k = 0; k < kRoutings; ++k) {
    std::vector<bool> used(kExperts, false);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int32_t> all(kExperts);
      for (int e = 0; e < kExperts; ++e) all[static_cast<size_t>(e)] = e;
      std::shuffle(all.begin(), all.end(), gen);
      for (int j = 0; j < kTopK; ++j) {
        routes.push_back(all[static_cast<size_t>(j)]);
        used[static_cast<size_t>(all[static_cast<size_t>(j)])] = true;
      }
    }
    for (bool u : used) distinct += u ? 1.0 / kRoutings : 0.0;
  }
  const kernels::ExpertGemvShape shape{tokens, kTopK, kExperts, shared_input};
  DeviceBuffer ids(routes.size() * 4), x(x_rows * cols * 4), y(slots * rows * 4),
      q8(kernels::q8_activation_bytes(x_rows, cols)),
      workspace(kind == Kernel::kMma ? kernels::expert_gemm_mma_workspace_bytes(id, shape, cols)
                                      : kernels::expert_gemv_grouped_workspace_bytes(shape));
  QRT_BENCH_CUDA(cudaMemcpy(ids.ptr, routes.data(), routes.size() * 4, cudaMemcpyHostToDevice));
  std::vector<float> hx(static_cast<size_t>(x_rows * cols));
  std::normal_distribution<float> dist;
  for (float& v : hx) v = dist(gen);
  QRT_BENCH_CUDA(cudaMemcpy(x.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  const kernels::Q8Activations q = kernels::q8_activations_at(q8.ptr, x_rows, cols);
  if (Status s = kernels::quantize_q8_activations(x.as<float>(), x_rows, cols, q, nullptr); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  int64_t run_index = 0;
  auto run = [&] {
    const int32_t* route = ids.as<int32_t>() + (run_index++ % kRoutings) * slots;
    switch (kind) {
      case Kernel::kMma:
        return kernels::expert_gemm_mma_grouped(id, expert0, *sizes, route, shape, {q.codes, q.scales},
                                                y.as<float>(), workspace.ptr, nullptr);
      case Kernel::kDp4a:
        return kernels::expert_gemv_dp4a_grouped(id, expert0, *sizes, route, shape, {q.codes, q.scales},
                                                 y.as<float>(), workspace.ptr, nullptr);
      case Kernel::kStaged:
        return kernels::expert_gemv_staged_grouped(id, expert0, *sizes, route, shape, x.as<float>(), y.as<float>(),
                                                   workspace.ptr, nullptr);
      default:
        return kernels::expert_gemv_grouped(id, expert0, *sizes, route, shape, x.as<float>(), y.as<float>(),
                                            workspace.ptr, nullptr);
    }
  };
  if (Status s = run(); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  time_with_events(state, nullptr, [&] { (void)run(); });
  const double bytes = distinct * static_cast<double>(sizes->data + sizes->scales + sizes->biases) +
                       (dp4a ? static_cast<double>(kernels::q8_activation_bytes(x_rows, cols)) : 4.0 * x_rows * cols) +
                       4.0 * static_cast<double>(slots * rows);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  const char* label = kind == Kernel::kMma      ? "expert_gemm_mma_grouped"
                      : kind == Kernel::kDp4a   ? "expert_gemv_dp4a_grouped"
                      : kind == Kernel::kStaged ? "expert_gemv_staged_grouped"
                                                : "expert_gemv_grouped (float)";
  state.SetLabel(std::string(label) + ", " +
                 std::to_string(static_cast<int>(distinct + 0.5)) + " experts used");
  state.counters["pct_of_copy_bw"] = benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0,
                                                        benchmark::Counter::kIsRate);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens) * state.iterations(), benchmark::Counter::kIsRate);
}

const bool registered = [] {
  struct Shape {
    const char* name;
    int64_t rows, cols;
    bool shared_input;
  };
  const Shape shapes[] = {{"gate_768x2048", 768, 2048, true}, {"down_2048x768", 2048, 768, false}};
  auto add = [](FormatId id, const Shape& s, Kernel kind) {
    const std::string name = kernel_prefix(kind, false) + std::string(format_name(id)) + "/" + s.name;
    benchmark::RegisterBenchmark(name.c_str(), BM_Experts, id, s.rows, s.cols, s.shared_input, kind)
        ->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
  };
  auto add_batch = [](FormatId id, const Shape& s, int64_t tokens, Kernel kind) {
    const std::string name = kernel_prefix(kind, true) + std::string(format_name(id)) + "/" + s.name +
                             "/tokens:" + std::to_string(tokens);
    benchmark::RegisterBenchmark(name.c_str(), BM_ExpertsBatch, id, s.rows, s.cols, s.shared_input, tokens, kind)
        ->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
  };
  for (const Shape& s : shapes) {
    for (FormatId id : {FormatId::kQ4_K, FormatId::kQ8_0}) {
      for (Kernel kind : {Kernel::kFloat, Kernel::kDp4a}) add(id, s, kind);
      for (int64_t tokens : {8, 512})
        for (Kernel kind : {Kernel::kFloat, Kernel::kDp4a, Kernel::kMma}) add_batch(id, s, tokens, kind);
    }
    for (FormatId id : {FormatId::kMXFP4, FormatId::kFP8_BLOCK, FormatId::kBF16}) {
      for (Kernel kind : {Kernel::kFloat, Kernel::kStaged}) add(id, s, kind);
      for (int64_t tokens : {8, 512})
        for (Kernel kind : {Kernel::kFloat, Kernel::kStaged}) add_batch(id, s, tokens, kind);
    }
  }
  return true;
}();

}  // namespace
}  // namespace qrt::bench
