// Prompt attention at the Llama-3-8B shape (32 query heads, 8 KV heads, head_dim 128; and head_dims 64 and 256, as
// Llama-3.2-1B's and Gemma's, with 32/8 heads): a causal prompt of T tokens over a cache holding exactly those keys,
// one layer, on the two tensor-core kernels: `registers` (attention_prefill_mma: S, P and O in registers, ldmatrix
// fragments, K/V tiles double-buffered with cp.async; over f16, and at head_dim 128 also over fp8 and q8_0 caches,
// whose tiles it converts to fp16 in shared memory) and `shared` (attention_prefill_tc, f16: S, P and O in shared
// memory around wmma). Work is the causal pairs' multiply-adds, T(T+1)/2 · head_dim per head for Q·Kᵀ and as many
// for P·V; the counter tflops is that work (2 flops per multiply-add) per second, against the H100's ~660 TFLOP/s of
// fp16 mma.sync and 990 of wgmma. Random inputs (N(0, 1) q, K and V), positions 0 .. T - 1.
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_bench_util.hpp"
#include "kernels/attention/attention_prefill_tc.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "kernels/quant/mx.hpp"
#include "qrt/kv_type.hpp"

namespace qrt::bench {
namespace {

enum class Kernel { kRegisters, kShared };

// The cache's bytes for `values` ([rows, cols] floats) in `type`: f16, E4M3 codes, or q8_0 blocks of 32.
std::vector<uint8_t> cache_bytes(KvType type, const std::vector<float>& values, int64_t cols) {
  std::vector<uint8_t> out(values.size() / static_cast<size_t>(cols) * kv_row_bytes(type, cols));
  if (type == KvType::kFp8) {
    for (size_t i = 0; i < values.size(); ++i) out[i] = quant::f32_to_e4m3(values[i]);
  } else if (type == KvType::kQ8_0) {
    for (size_t b = 0; b < values.size() / kKvQ8Block; ++b)
      quant::quantize_q8_0_block(values.data() + b * kKvQ8Block, out.data() + b * kKvQ8BlockBytes);
  } else {
    for (size_t i = 0; i < values.size(); ++i) {
      const __half h = __float2half(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

void BM_PrefillAttention(benchmark::State& state, int head_dim, Kernel which, KvType type) {
  const int64_t tokens = state.range(0);
  const int heads = 32, kv_heads = 8;
  const int64_t q_elems = tokens * heads * head_dim, kv_elems = tokens * kv_heads * head_dim;
  std::mt19937 gen(11);
  std::normal_distribution<float> dist;
  std::vector<float> hq(static_cast<size_t>(q_elems)), hk(static_cast<size_t>(kv_elems)), hv(hk.size());
  for (float& x : hq) x = dist(gen);
  for (float& x : hk) x = dist(gen);
  for (float& x : hv) x = dist(gen);
  const std::vector<uint8_t> kb = cache_bytes(type, hk, kv_heads * head_dim);
  const std::vector<uint8_t> vb = cache_bytes(type, hv, kv_heads * head_dim);
  std::vector<int32_t> positions(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int32_t count = static_cast<int32_t>(tokens);
  DeviceBuffer q(q_elems * 4), k(kb.size()), v(vb.size()), pos(tokens * 4), key_count(4), out(q_elems * 4);
  QRT_BENCH_CUDA(cudaMemcpy(q.ptr, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(k.ptr, kb.data(), kb.size(), cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(v.ptr, vb.data(), vb.size(), cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(pos.ptr, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
  QRT_BENCH_CUDA(cudaMemcpy(key_count.ptr, &count, 4, cudaMemcpyHostToDevice));

  kernels::AttentionShape shape{tokens, tokens, heads, kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim)), 0,
                                type, {}};
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
  state.SetLabel(std::string(which == Kernel::kRegisters ? "registers " : "shared ") + std::string(kv_type_name(type)));
}

const bool registered = [] {
  struct Variant {
    int head_dim;
    Kernel which;
    KvType type;
  };
  for (const Variant& x : {Variant{128, Kernel::kRegisters, KvType::kF16}, {128, Kernel::kShared, KvType::kF16},
                           {64, Kernel::kRegisters, KvType::kF16}, {64, Kernel::kShared, KvType::kF16},
                           {128, Kernel::kRegisters, KvType::kFp8}, {128, Kernel::kRegisters, KvType::kQ8_0},
                           {256, Kernel::kRegisters, KvType::kF16}, {256, Kernel::kShared, KvType::kF16}}) {
    const std::string kernel = x.which == Kernel::kRegisters ? "registers" : "shared";
    const std::string name =
        "prefill_attention/d" + std::to_string(x.head_dim) + "/" + kernel + "/" + std::string(kv_type_name(x.type));
    benchmark::RegisterBenchmark(name.c_str(), BM_PrefillAttention, x.head_dim, x.which, x.type)
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
