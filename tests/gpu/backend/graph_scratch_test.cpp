// The backend's scratch memory (dequantized weight tiles, a wide x's quantization, the grouped experts' slot lists)
// inside captured graphs: a graph replays into the block it captured, so when the scratch outgrows that block the
// block must stay the graph's, never handed to a new allocation.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend_pair.hpp"

namespace qrt {
namespace {

using CudaGraphScratch = test::BackendPair;

TEST_F(CudaGraphScratch, AGraphKeepsItsScratchBlockWhenTheScratchGrows) {
  if (!gpu_->supports_graphs()) GTEST_SKIP() << "no graph capture on this backend";
  const int64_t experts = 6, out = 16, in = 64, top_k = 2;
  const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2340);
  auto w = test::quantized_tensor(quant::FormatId::kQ8_0, {experts, out, in}, values,
                                  test::default_params(quant::FormatId::kQ8_0));
  const auto weight_pair = weight(w->tensor);
  // Two tokens: the grouped experts kernel, its slot lists (48 bytes) in the scratch block.
  const auto ids = input_values(std::vector<int32_t>{0, 3, 5, 3}, 2, top_k);
  const auto x = input(2, in, 2341);
  const auto eager = output(2 * top_k, out), replayed = output(2 * top_k, out);
  ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, eager.cpu).ok());
  ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, eager.gpu).ok());
  expect_close(eager, kIntegerGemvTolerance, "grouped Q8_0 experts of two tokens");
  auto graph = gpu_->capture([&] { return gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, replayed.gpu); });
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();

  // 300 tokens outgrow the block: their slot lists and x's quantization need about 50 KB.
  std::vector<int32_t> many(600);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int32_t>((i * 7 + i / 2) % experts);
  const auto ids_many = input_values(many, 300, top_k);
  const auto x_many = input(300, in, 2342);
  const auto y_many = output(300 * top_k, out);
  ASSERT_TRUE(cpu_.linear_experts(x_many.cpu, weight_pair.cpu, ids_many.cpu, y_many.cpu).ok());
  ASSERT_TRUE(gpu_->linear_experts(x_many.gpu, weight_pair.gpu, ids_many.gpu, y_many.gpu).ok());
  expect_close(y_many, kIntegerGemvTolerance, "grouped Q8_0 experts of 300 tokens");

  // A new allocation of the old block's size (the pool hands back a released block of the same size class), then
  // the graph again: it must neither write into the new buffer nor lose its own lists.
  std::vector<int32_t> pattern(12);
  std::iota(pattern.begin(), pattern.end(), 1000);
  const auto fresh = input_values(pattern, 1, static_cast<int64_t>(pattern.size()));
  ASSERT_TRUE(gpu_->launch(**graph).ok());
  ASSERT_TRUE(gpu_->synchronize().ok());
  EXPECT_EQ(gpu_values(fresh.gpu), pattern) << "the graph replayed into memory the backend gave away";
  EXPECT_EQ(gpu_values(replayed.gpu), gpu_values(eager.gpu)) << "the replay differs from the eager run";
}

}  // namespace
}  // namespace qrt
