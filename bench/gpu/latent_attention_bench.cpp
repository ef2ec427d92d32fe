// DeepSeek's latent decode attention at DeepSeek-V2-Lite's shape (16 query heads on one 576-wide row per key, f16
// cache, one decode row), T keys: `tensor_cores` (attention_latent_mma: the 16 heads the m16 of mma.sync, each tile
// of rows read once) against `fp32` (attention_latent's CUDA-core kernel, the same plan and merge), both through
// attention_latent with its split plan. Bytes are the T rows once (what the tensor-core kernel reads); pct_of_copy_bw
// compares them with the measured copy bandwidth. Random N(0, 1) rows and queries, positions 0 .. T - 1.
#include <cuda_fp16.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_bench_util.hpp"
#include "kernels/attention/attention_latent.hpp"

namespace qrt::bench {
namespace {

void BM_LatentAttention(benchmark::State& state, bool tensor_cores) {
  const int64_t keys = state.range(0);
  const int heads = 16, row = 576;
  std::mt19937 gen(13);
  std::normal_distribution<float> dist;
  std::vector<float> hq(static_cast<size_t>(heads * row));
  for (float& x : hq) x = dist(gen);
  std::vector<__half> hk(static_cast<size_t>(keys * row));
  for (__half& x : hk) x = __float2half(dist(gen));
  std::vector<int32_t> positions(static_cast<size_t>(keys));
  for (int64_t i = 0; i < keys; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int32_t count = static_cast<int32_t>(keys), q_position = count - 1;
  kernels::AttentionShape shape{1, keys, heads, 1, row, 0.07f, 0, KvType::kF16, {}};
  const kernels::AttentionLatentPlan plan = kernels::plan_attention_latent(shape);
  if (plan.splits <= 0) {
    state.SkipWithError("no latent plan for this shape");
    return;
  }
  DeviceBuffer q(hq.size() * 4), k(hk.size() * 2), pos(positions.size() * 4), key_count(4), q_pos(4),
      workspace(plan.workspace_bytes), out(hq.size() * 4);
  QRT_BENCH_CUDA(cudaMemcpy(q.ptr, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(k.ptr, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(pos.ptr, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(key_count.ptr, &count, 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(q_pos.ptr, &q_position, 4, cudaMemcpyHostToDevice));
  int optin = 0;
  QRT_BENCH_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  Status status = ok_status();
  time_with_events(state, nullptr, [&] {
    status = kernels::attention_latent(q.as<float>(), q_pos.as<int32_t>(), k.ptr, pos.as<int32_t>(),
                                       key_count.as<int32_t>(), shape, plan, workspace.as<float>(), out.as<float>(),
                                       nullptr, tensor_cores ? static_cast<uint64_t>(optin) : 0);
  });
  if (!status.ok()) {
    state.SkipWithError(status.to_string().c_str());
    return;
  }
  const double bytes = static_cast<double>(keys) * row * 2;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["pct_of_copy_bw"] =
      benchmark::Counter(bytes * state.iterations() / measured_copy_bandwidth() * 100.0, benchmark::Counter::kIsRate);
  state.SetLabel(tensor_cores ? "tensor cores" : "fp32");
}

const bool registered = [] {
  for (bool tensor_cores : {true, false})
    benchmark::RegisterBenchmark(
        (std::string("latent_attention/v2_lite/") + (tensor_cores ? "tensor_cores" : "fp32")).c_str(),
        BM_LatentAttention, tensor_cores)
        ->Arg(4096)
        ->Arg(32768)
        ->ArgName("keys")
        ->UseManualTime()
        ->MinTime(0.05)
        ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace qrt::bench
