// MoE experts in the float formats (MXFP4, NVFP4, MXFP8, FP8, block FP8, AFQ2/3/5/6, F32, F16, BF16) on the staged
// GEMV (kernels::expert_gemv_staged*, through linear_experts): one token's slots each on their own, a batch grouped
// by expert in passes of 1, 2, 4 and 8 slots, against the CPU and against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend_pair.hpp"
#include "kernels/moe/expert_gemv.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

// OCP MXFP4 and NVFP4 have an integer-dot kernel too, which the backend prefers; these tests turn it off
// (QRT_CUDA_GEMV=float's switch) so that they run here as well, as they do with the float GEMV chosen.
class CudaBackendStagedExperts : public test::BackendPair {
 protected:
  void SetUp() override {
    BackendPair::SetUp();
    if (gpu_ != nullptr) gpu_->set_integer_gemv(false);
  }
  // Whether a stack of [out, in] experts in `format` takes the staged kernel (the probe stands in for well-aligned
  // device parts and x).
  static bool staged_applies(quant::FormatId format, int64_t out, int64_t in) {
    quant::QuantView v = integer_gemv_probe(in);
    v.rows = out;
    v.params = test::default_params(format);
    const auto sizes = cpu::part_sizes(format, out, in, v.params);
    return sizes.ok() && kernels::expert_gemv_staged_applies(format, v, *sizes, reinterpret_cast<const float*>(v.data));
  }
};

// Widths that end inside a 256-column tile (MXFP4 at gpt-oss's 2880, BF16, F32, F16, MXFP8), span several chunks
// and scale tiles (block FP8's 128 columns), or several AFQ groups; 37 rows end inside a warp's rows.
const std::pair<quant::FormatId, int64_t> kCases[] = {
    {quant::FormatId::kMXFP4, 2880}, {quant::FormatId::kNVFP4, 512}, {quant::FormatId::kMXFP8, 288},
    {quant::FormatId::kFP8, 256},    {quant::FormatId::kFP8_BLOCK, 640}, {quant::FormatId::kAFQ6, 1024},
    {quant::FormatId::kAFQ3, 384},   {quant::FormatId::kBF16, 1040},  {quant::FormatId::kF16, 264},
    {quant::FormatId::kF32, 520}};

// 12 tokens, 4 experts each of 8: expert e is chosen kChosen[e] times (passes of 1, 2, 3 → 4, 4, 5 → 8, 8 + 1,
// 8 + 4 and 8 + 4 slots); dealing the list out token by token keeps each token's four distinct.
std::vector<int32_t> dealt_picks(int64_t tokens, int64_t top_k) {
  const int kChosen[8] = {1, 2, 3, 4, 5, 9, 12, 12};
  std::vector<int32_t> deck;
  for (const int e : {6, 5, 7, 4, 3, 2, 1, 0}) deck.insert(deck.end(), kChosen[e], e);
  std::vector<int32_t> picks(static_cast<size_t>(tokens * top_k));
  for (size_t j = 0; j < deck.size(); ++j) picks[(j % tokens) * top_k + j / tokens] = deck[j];
  return picks;
}

TEST_F(CudaBackendStagedExperts, ABatchAndEachTokenAloneMatchCpu) {
  const int64_t experts = 8, out = 37, tokens = 12, top_k = 4;
  const auto ids = input_values(dealt_picks(tokens, top_k), tokens, top_k);
  for (const auto& [format, in] : kCases) {
    const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2900);
    auto w = test::quantized_tensor(format, {experts, out, in}, values, test::default_params(format));
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(staged_applies(format, out, in)) << quant::format_name(format) << " [" << in << "]";
    const auto weight_pair = weight(w->tensor);
    const auto x_shared = input(tokens, in, 2901);
    const auto x_slots = input(tokens * top_k, in, 2902);
    for (const auto* x : {&x_shared, &x_slots}) {
      const std::string name = std::string(quant::format_name(format)) + " [" + std::to_string(in) + "]" +
                               (x == &x_shared ? " shared input" : " per-slot input");
      const auto y = output(tokens * top_k, out);
      ASSERT_TRUE(cpu_.linear_experts(x->cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
#if defined(QRT_SIMT)
      const simt::StreamCounters before = simt::device_counters(0);
#endif
      const Status s = gpu_->linear_experts(x->gpu, weight_pair.gpu, ids.gpu, y.gpu);
      ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
#if defined(QRT_SIMT)
      const simt::StreamCounters batch_cost = simt::device_counters(0) - before;
      EXPECT_EQ(batch_cost.kernel_launches, 2u) << name << ": group the slots, then the staged kernel";
#endif
      expect_close(y, 1e-5, name + ", 12 tokens");

      // Token by token (the one-token kernel, a block row per slot): the batch's bits, row for row.
      const std::vector<float> batch = gpu_values(y.gpu);
      const int64_t x_rows = x == &x_shared ? 1 : top_k;
      for (int64_t t = 0; t < tokens; ++t) {
        const auto y_t = output(top_k, out);
#if defined(QRT_SIMT)
        const simt::StreamCounters one_before = simt::device_counters(0);
#endif
        ASSERT_TRUE(gpu_->linear_experts(x->gpu.row_range(t * x_rows, x_rows), weight_pair.gpu,
                                         ids.gpu.row_range(t, 1), y_t.gpu)
                        .ok());
#if defined(QRT_SIMT)
        EXPECT_EQ((simt::device_counters(0) - one_before).kernel_launches, 1u) << name << ": one kernel per token";
#endif
        const std::vector<float> alone = gpu_values(y_t.gpu);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + t * top_k * out))
            << name << " token " << t << ": the batch differs from the token alone";
      }
    }
  }
}

// An id outside the stack gives its slot's rows NaN, on the one-token kernel and in a batch; the other rows are the
// CPU's.
TEST_F(CudaBackendStagedExperts, ABadIdGivesItsSlotNaN) {
  const int64_t experts = 5, out = 21, top_k = 3, in = 288;
  for (const quant::FormatId format : {quant::FormatId::kMXFP4, quant::FormatId::kBF16}) {
    const std::string name(quant::format_name(format));
    const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2910);
    auto w = test::quantized_tensor(format, {experts, out, in}, values, test::default_params(format));
    const auto weight_pair = weight(w->tensor);
    for (const int64_t tokens : {int64_t{1}, int64_t{3}}) {
      std::vector<int32_t> good, bad;
      for (int64_t j = 0; j < tokens * top_k; ++j) good.push_back(static_cast<int32_t>(j % experts));
      bad = good;
      const int64_t bad_slot = tokens * top_k - 2;
      bad[static_cast<size_t>(bad_slot)] = tokens == 1 ? -1 : static_cast<int32_t>(experts);
      const auto x = input(tokens, in, 2911);
      const auto want = output(tokens * top_k, out), got = output(tokens * top_k, out);
      ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, input_values(good, tokens, top_k).cpu, want.cpu).ok());
      ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, input_values(bad, tokens, top_k).gpu, got.gpu).ok());
      expect_bad_slot_only(gpu_values(got.gpu), cpu_values(want.cpu), tokens * top_k, out, bad_slot, 1e-4f,
                           name + ", " + std::to_string(tokens) + " token(s)");
    }
  }
}

// The kernel entry points refuse, by name, a format with an integer-dot kernel instead and x that is not 16-byte
// aligned; linear_experts then takes another kernel, still correct.
TEST_F(CudaBackendStagedExperts, WhatItCannotStreamGoesElsewhere) {
  const int64_t experts = 2, out = 8, in = 256, top_k = 2;
  EXPECT_FALSE(staged_applies(quant::FormatId::kQ4_K, out, in));
  EXPECT_FALSE(staged_applies(quant::FormatId::kHQQ4, out, in));
  EXPECT_FALSE(staged_applies(quant::FormatId::kBF16, out, 260)) << "rows of whole 8-column lanes only";
  quant::QuantView probe = integer_gemv_probe(in);
  probe.rows = out;
  const auto sizes = cpu::part_sizes(quant::FormatId::kQ4_K, out, in, test::default_params(quant::FormatId::kQ4_K));
  ASSERT_TRUE(sizes.ok());
  const kernels::ExpertGemvShape shape{1, static_cast<int>(top_k), 2};
  const Status refused = kernels::expert_gemv_staged(quant::FormatId::kQ4_K, probe, *sizes, nullptr, shape,
                                                     reinterpret_cast<const float*>(probe.data), nullptr, nullptr);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.to_string().find("expert_gemv_staged q4_k: no staged kernel for experts of [8, 256]"),
            std::string::npos)
      << refused.to_string();

  for (const quant::FormatId format : {quant::FormatId::kMXFP4, quant::FormatId::kF16}) {
    auto w = test::quantized_tensor(format, {experts, out, in},
                                    test::random_normal(static_cast<size_t>(experts * out * in), 2920),
                                    test::default_params(format));
    const auto weight_pair = weight(w->tensor);
    const auto x = input(1, in + 4, 2921);
    const auto ids = input_values(std::vector<int32_t>{1, 0}, 1, top_k);
    const auto y = output(top_k, out);
    // Columns 1..256 of the row: 4 bytes past a 16-byte boundary.
    const ConstF32View x_off{x.gpu.data + 1, 1, in}, x_off_cpu{x.cpu.data + 1, 1, in};
    ASSERT_TRUE(cpu_.linear_experts(x_off_cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
    ASSERT_TRUE(gpu_->linear_experts(x_off, weight_pair.gpu, ids.gpu, y.gpu).ok());
    expect_close(y, 1e-5, std::string(quant::format_name(format)) + " with x 4 bytes off alignment");
  }
}

}  // namespace
}  // namespace qrt
