// A prompt's MoE experts on the int8 tensor cores (kernels::expert_gemm_mma_grouped, through linear_experts): the slots
// grouped by expert, cut into chunks of up to 32 (24 or 16 for some formats), gathered into the GEMM's tiles and
// multiplied per (32 weight rows, chunk), against the CPU; the routing between it and the grouped integer-dot kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_pair.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using CudaBackendExpertsMma = test::BackendPair;

// 40 tokens, 2 experts each of 6: expert 0 by every token (40 slots: chunks of 32 and 8; 24 and 16; or 16, 16 and 8 for
// Q6_K, Q3_K, Q2_K and NVFP4), the second pick spread over experts 1..5 (8 slots each); 40 weight rows (a block of 32
// and a partial one). Shared and per-slot inputs (40 and 80 rows, wider than the decode buffer: quantized into scratch
// memory).
TEST_F(CudaBackendExpertsMma, APromptOnTheTensorCoresMatchesCpu) {
  const int64_t experts = 6, out = 40, tokens = 40, top_k = 2;
  std::vector<int32_t> picks;
  for (int64_t t = 0; t < tokens; ++t) {
    picks.push_back(0);
    picks.push_back(static_cast<int32_t>(1 + t % 5));
  }
  const auto ids = input_values(picks, tokens, top_k);
  for (const auto& [format, in] : {std::pair{quant::FormatId::kQ4_K, int64_t{512}}, {quant::FormatId::kQ8_0, 256},
                                   {quant::FormatId::kQ6_K, 512}, {quant::FormatId::kQ5_K, 256},
                                   {quant::FormatId::kQ4_0, 256}, {quant::FormatId::kIQ4_NL, 256},
                                   {quant::FormatId::kMXFP4_GGML, 256}, {quant::FormatId::kMXFP4, 512},
                                   {quant::FormatId::kQ3_K, 256}, {quant::FormatId::kQ4_1, 256},
                                   {quant::FormatId::kQ5_0, 256}, {quant::FormatId::kQ5_1, 256},
                                   {quant::FormatId::kQ2_K, 512}, {quant::FormatId::kIQ4_XS, 256},
                                   {quant::FormatId::kTQ2_0, 256}, {quant::FormatId::kNVFP4, 512},
                                   {quant::FormatId::kIQ2_XXS, 256}, {quant::FormatId::kIQ1_S, 512},
                                   {quant::FormatId::kAFQ4, 256}, {quant::FormatId::kAFQ6, 512}}) {
    const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2700);
    quant::QuantParams params = test::default_params(format);
    if (format == quant::FormatId::kNVFP4) params.global_scale = 0.5f;  // the stack's one tensor scale, applied
    auto w = test::quantized_tensor(format, {experts, out, in}, values, params);
    const auto weight_pair = weight(w->tensor);
    const auto x_shared = input(tokens, in, 2701);
    const auto x_slots = input(tokens * top_k, in, 2702);
    for (const auto* x : {&x_shared, &x_slots}) {
      const std::string name = std::string(quant::format_name(format)) +
                               (x == &x_shared ? " shared input" : " per-slot input");
      const auto y = output(tokens * top_k, out);
      ASSERT_TRUE(cpu_.linear_experts(x->cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
#if defined(QRT_SIMT)
      const simt::StreamCounters before = simt::device_counters(0);
#endif
      const Status s = gpu_->linear_experts(x->gpu, weight_pair.gpu, ids.gpu, y.gpu);
      ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
      EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 5u)
          << name << ": quantize x, group the slots, cut the chunks, gather the tiles, the tensor-core GEMM";
#endif
      expect_close(y, kIntegerGemvTolerance, name + " on the tensor cores");
    }
  }
}

// An id outside the stack gives its slot's row NaN and leaves the others the CPU's; a decode step of 2 tokens (2
// slots per expert at most: under 8 on average) keeps the grouped integer-dot kernel, and set_mma_gemm(false) keeps
// it for the prompt too.
TEST_F(CudaBackendExpertsMma, BadIdsAndTheRouting) {
  const int64_t experts = 4, out = 32, in = 256, tokens = 20, top_k = 2;
  const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2710);
  auto w = test::quantized_tensor(quant::FormatId::kQ4_K, {experts, out, in}, values,
                                  test::default_params(quant::FormatId::kQ4_K));
  const auto weight_pair = weight(w->tensor);
  std::vector<int32_t> picks;
  for (int64_t t = 0; t < tokens; ++t) {
    picks.push_back(static_cast<int32_t>(t % 4));
    picks.push_back(static_cast<int32_t>((t + 1) % 4));
  }
  const auto x = input(tokens, in, 2711);
  const auto y = output(tokens * top_k, out);
  const auto ids = input_values(picks, tokens, top_k);
  ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
  picks[7] = 4;  // token 3, slot 1: outside the stack
  const auto bad_ids = input_values(picks, tokens, top_k);
  const auto y_bad = output(tokens * top_k, out);
  ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, bad_ids.gpu, y_bad.gpu).ok());
  expect_bad_slot_only(gpu_values(y_bad.gpu), cpu_values(y.cpu), tokens * top_k, out, 7, 2e-3f, "Q4_K prompt");

#if defined(QRT_SIMT)
  const auto launches = [&](ConstF32View xv, ConstI32View idv, F32View yv) {
    const simt::StreamCounters before = simt::device_counters(0);
    EXPECT_TRUE(gpu_->linear_experts(xv, weight_pair.gpu, idv, yv).ok());
    return (simt::device_counters(0) - before).kernel_launches;
  };
  const auto y2 = output(2 * top_k, out);
  EXPECT_EQ(launches(x.gpu.row_range(0, 2), ids.gpu.row_range(0, 2), y2.gpu), 3u)
      << "2 tokens: quantize, group, the grouped integer-dot kernel";
  gpu_->set_mma_gemm(false);
  EXPECT_EQ(launches(x.gpu, ids.gpu, y.gpu), 3u) << "the prompt with the tensor-core GEMM off: quantize (scratch), "
                                                    "group, the grouped integer-dot kernel";
#else
  gpu_->set_mma_gemm(false);
  ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, y.gpu).ok());
#endif
  expect_close(y, kIntegerGemvTolerance, "Q4_K prompt experts, tensor-core GEMM off");
}

// A batch of 64 slots or more takes the tensor cores even at under 8 slots per expert (32 tokens routed to 2 of 16:
// 4 each); 62 slots keep the grouped integer-dot kernel. Both against the CPU.
TEST_F(CudaBackendExpertsMma, SixtyFourSlotsTakeTheTensorCoresAtFewSlotsPerExpert) {
  const int64_t experts = 16, out = 32, in = 256, top_k = 2;
  auto w = test::quantized_tensor(quant::FormatId::kQ4_K, {experts, out, in},
                                  test::random_normal(static_cast<size_t>(experts * out * in), 2720),
                                  test::default_params(quant::FormatId::kQ4_K));
  const auto weight_pair = weight(w->tensor);
  for (const int64_t tokens : {int64_t{32}, int64_t{31}}) {
    const std::string name = std::to_string(tokens * top_k) + " slots over 16 experts";
    std::vector<int32_t> picks;
    for (int64_t t = 0; t < tokens; ++t) {
      picks.push_back(static_cast<int32_t>((3 * t) % experts));
      picks.push_back(static_cast<int32_t>((3 * t + 7) % experts));
    }
    const auto x = input(tokens, in, 2721 + tokens);
    const auto ids = input_values(picks, tokens, top_k);
    const auto y = output(tokens * top_k, out);
    ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, y.gpu).ok());
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, tokens * top_k >= 64 ? 5u : 3u)
        << name << ": quantize, group, chunks, gather, GEMM; or quantize, group, the grouped integer-dot kernel";
#endif
    expect_close(y, kIntegerGemvTolerance, name);
  }
}

}  // namespace
}  // namespace qrt
