// Prompt attention at the Llama-3-8B shape (32 query heads, 8 KV heads, head_dim 128; and head_dim 64 with 32/8
// heads, as Llama-3.2-1B's): a causal prompt of T tokens over an f16 cache holding exactly those keys, one layer, on
// the two tensor-core kernels: `registers` (attention_prefill_mma: S, P and O in registers, ldmatrix fragments, K/V
// tiles double-buffered with cp.async) and `shared` (attention_prefill_tc: S, P and O in shared memory around wmma).
// Work is the causal pairs' multiply-adds, 2 · T(T+1)/2 · head_dim per head for Q·Kᵀ and as many for P·V; the
// counter tflops is that work (2 flops per multiply-add) per second, against the H100's ~660 TFLOP/s of fp16 mma.sync
// and 990 of wgmma. Random inputs (N(0, 1) q, K and V), positions 0 .. T - 1.
#include <cuda_fp16.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_bench_util.hpp"
#include "kernels/attention/attention_prefill_tc.hpp"

namespace qrt::bench {
namespace {

enum class Kernel { kRegisters, kShared };

void BM_PrefillAttention(benchmark::State& state, int head_dim, Kernel which) {
  const int64_t tokens = state.range(0);
  const int heads = 32, kv_heads = 8;
  const int64_t q_elems = tokens * heads * head_dim, kv_elems = tokens * kv_heads * head_dim;
  std::mt19937 gen(11);
  std::normal_distribution<float> dist;
  std::vector<float> hq(static_cast<size_t>(q_elems));
  std::vector<__half> hk(static_cast<size_t>(kv_elems)), hv(static_cast<size_t>(kv_elems));
  for (float& x : hq) x = dist(gen);
  for (size_t i = 0; i < hk.size(); ++i) {
    hk[i] = __float2half(dist(gen));
    hv[i] = __float2half(dist(gen));
  }
  std::vector<int32_t> positions(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int32_t count = static_cast<int32_t>(tokens);
  DeviceBuffer q(q_elems * 4), k(kv_elems * 2), v(kv_elems * 2), pos(tokens * 4), key_count(4), out(q_elems * 4);
  QRT_BENCH_CUDA(cudaMemcpy(q.ptr, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(k.ptr, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(v.ptr, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(pos.ptr, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(key_count.ptr, &count, 4, cudaMemcpyHostToDevice));

  kernels::AttentionShape shape{tokens, tokens, heads, kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim)), 0,
                                KvType::kF16, {}};
  int optin = 0;
  QRT_BENCH_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const bool applies = which == Kernel::kRegisters
                           ? kernels::attention_prefill_mma_applies(shape, k.ptr, v.ptr, static_cast<uint64_t>(optin))
                           : kernels::attention_prefill_tc_applies(shape, static_cast<uint64_t>(optin));
  if (!applies) {
    state.SkipWithError("the kernel does not take this shape on this device");
    return;
  }
  Status status = ok_status();
  time_with_events(state, nullptr, [&] {
    const auto* qp = q.as<const float>();
    const auto* kp = pos.as<const int32_t>();
    const auto* kc = key_count.as<const int32_t>();
    status = which == Kernel::kRegisters
                 ? kernels::attention_prefill_mma(qp, kp, k.ptr, v.ptr, kp, kc, shape, out.as<float>(), nullptr)
                 : kernels::attention_prefill_tc(qp, kp, k.ptr, v.ptr, kp, kc, shape, out.as<float>(), nullptr);
  });
  if (!status.ok()) {
    state.SkipWithError(status.to_string().c_str());
    return;
  }
  const double pairs = static_cast<double>(tokens) * static_cast<double>(tokens + 1) / 2.0;
  const double flops = 4.0 * pairs * head_dim * heads;
  state.counters["tflops"] = benchmark::Counter(flops * state.iterations() / 1e12, benchmark::Counter::kIsRate);
  state.SetLabel(which == Kernel::kRegisters ? "registers" : "shared");
}

const bool registered = [] {
  for (int head_dim : {128, 64})
    for (Kernel which : {Kernel::kRegisters, Kernel::kShared}) {
      const std::string name = "prefill_attention/d" + std::to_string(head_dim) + "/" +
                               (which == Kernel::kRegisters ? "registers" : "shared");
      benchmark::RegisterBenchmark(name.c_str(), BM_PrefillAttention, head_dim, which)
          ->Arg(512)
          ->Arg(2048)
          ->Arg(8192)
          ->ArgName("tokens")
          ->UseManualTime()
          ->MinTime(0.05)
          ->Unit(benchmark::kMicrosecond);
    }
  return true;
}();

}  // namespace
}  // namespace qrt::bench
