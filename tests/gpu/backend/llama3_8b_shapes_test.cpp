// Every CUDA op at the shapes of Llama-3-8B (hidden 4096, FFN 14336, vocabulary 128256, 32 query heads and 8 KV
// heads of 128) against the CPU backend, and the edge shapes around them: attention and RoPE at 1 and 4097
// positions, widths that no fast path takes. Big weights are random code bytes with finite random scales
// (tests/unit/gemv_lanes/gemv_test_weights.hpp): a quantizer would spend seconds on them and test nothing more.
// Bounds as in ops_test.cpp and linear_test.cpp (relative L2, fp32 on the device against the reference).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <memory>

#include "backend_pair.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "gemv_test_weights.hpp"

namespace qrt {
namespace {

constexpr int64_t kHidden = 4096, kFfn = 14336, kVocab = 128256;
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128;

using test::BackendPair;
using test::DualWeight;

class Llama3Shapes : public BackendPair {
 protected:
  // A [rows, cols] matrix of random codes in `format` (a format randomize_codes knows), bytes kept by the fixture.
  DualWeight random_matrix(quant::FormatId format, std::vector<int64_t> shape, uint64_t seed) {
    const int64_t cols = shape.back(), rows = shape.size() == 3 ? shape[0] * shape[1] : shape[0];
    const quant::QuantParams p = test::gemv_test_params(format);
    auto sizes = cpu::part_sizes(format, rows, cols, p);
    EXPECT_TRUE(sizes.ok()) << sizes.status().to_string();
    quant::QuantBuffers& q = buffers_.emplace_back();
    q.data.resize(sizes->data);
    q.scales.resize(sizes->scales);
    q.biases.resize(sizes->biases);
    EXPECT_TRUE(test::randomize_codes(format, p, q, seed)) << quant::format_name(format);
    QuantTensor t;
    t.name = "random." + std::string(quant::format_name(format));
    t.format = format;
    t.shape = std::move(shape);
    t.params = p;
    t.data = {q.data.data(), q.data.size()};
    if (!q.scales.empty()) t.scales = {q.scales.data(), q.scales.size()};
    if (!q.biases.empty()) t.biases = {q.biases.data(), q.biases.size()};
    return weight(t);
  }

  // gemv_bound: the relative L2 allowed at decode batch sizes (gemv_tolerance); the GEMM path allows kGemmTolerance.
  void check_linear(const DualWeight& w, double gemv_bound, int64_t in, int64_t out, int64_t tokens,
                    const std::string& what) {
    const auto x = input(tokens, in, 90 + tokens);
    const auto y = output(tokens, out);
    ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok());
    const Status s = gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_close(y, tokens > kernels::kGemvMaxBatch ? kGemmTolerance : gemv_bound,
                 what + ", " + std::to_string(tokens) + " tokens");
  }

  std::list<quant::QuantBuffers> buffers_;
};

// The fast GEMV kernels at batch 1 and 8 and the dequantize + GEMM path at 9 tokens, on the FFN's matrices.
TEST_F(Llama3Shapes, FfnProjectionsInTheFastFormats) {
  const auto gate = random_matrix(quant::FormatId::kQ4_K, {kFfn, kHidden}, 1);
  using quant::FormatId;
  const double q4k = gemv_tolerance(FormatId::kQ4_K, kHidden), q6k = gemv_tolerance(FormatId::kQ6_K, kFfn);
  for (int64_t tokens : {1, 8, 9}) check_linear(gate, q4k, kHidden, kFfn, tokens, "Q4_K gate [14336, 4096]");
  const auto down = random_matrix(FormatId::kQ6_K, {kHidden, kFfn}, 2);
  for (int64_t tokens : {1, 8}) check_linear(down, q6k, kFfn, kHidden, tokens, "Q6_K down [4096, 14336]");
  const auto up = random_matrix(FormatId::kAFQ4, {kFfn, kHidden}, 3);
  check_linear(up, gemv_tolerance(FormatId::kAFQ4, kHidden), kHidden, kFfn, 1, "AFQ4 up [14336, 4096]");
  // The float GEMV of the integer formats (the integer-dot path off) at the same shapes.
  gpu_->set_integer_gemv(false);
  check_linear(gate, 1e-5, kHidden, kFfn, 1, "Q4_K gate [14336, 4096], float GEMV");
  check_linear(down, 1e-5, kFfn, kHidden, 8, "Q6_K down [4096, 14336], float GEMV");
  gpu_->set_integer_gemv(true);
}

// The generic GEMV (formats without a fast kernel) at the FFN's width.
TEST_F(Llama3Shapes, GenericGemvAtTheFfnWidth) {
  const std::vector<float> values = test::random_normal(static_cast<size_t>(64 * kFfn), 4, 0.05f);
  const quant::FormatId generic = quant::FormatId::kQ3_K;
  auto w = test::quantized_tensor(generic, {64, kFfn}, values, test::default_params(generic));
  const auto pair = weight(w->tensor);
  // Q3_K's decode GEMV is the integer-dot one; with x kept in fp32 it is the generic float kernel.
  for (int64_t tokens : {1, 8})
    check_linear(pair, gemv_tolerance(generic, kFfn), kFfn, 64, tokens, "Q3_K [64, 14336], integer dot");
  gpu_->set_integer_gemv(false);
  for (int64_t tokens : {1, 8}) check_linear(pair, 1e-5, kFfn, 64, tokens, "Q3_K [64, 14336], generic float");
  gpu_->set_integer_gemv(true);
  auto iq = test::quantized_tensor(quant::FormatId::kIQ4_XS, {64, kFfn}, values, {});
  const auto iq_pair = weight(iq->tensor);
  check_linear(iq_pair, gemv_tolerance(quant::FormatId::kIQ4_XS, kFfn), kFfn, 64, 1, "IQ4_XS [64, 14336]");
  gpu_->set_integer_gemv(false);
  check_linear(iq_pair, 1e-5, kFfn, 64, 1, "IQ4_XS [64, 14336], generic float");
  gpu_->set_integer_gemv(true);
}

// The output projection over the whole vocabulary, then argmax and sampling of its logits.
TEST_F(Llama3Shapes, OutputProjectionArgmaxAndSampling) {
  const auto head = random_matrix(quant::FormatId::kQ8_0, {kVocab, kHidden}, 5);
  const int64_t rows = 2;
  const auto x = input(rows, kHidden, 6);
  const auto logits = output(rows, kVocab);
  ASSERT_TRUE(cpu_.linear(x.cpu, head.cpu, WeightHandle{}, logits.cpu).ok());
  ASSERT_TRUE(gpu_->linear(x.gpu, head.gpu, WeightHandle{}, logits.gpu).ok());
  expect_close(logits, gemv_tolerance(quant::FormatId::kQ8_0, kHidden), "Q8_0 output [128256, 4096]");
  // Argmax and sampling of the device's logits, both backends given the same values.
  const auto same = input_values(gpu_values(logits.gpu), rows, kVocab);
  auto cpu_ids = alloc<int32_t>(rows, 1), gpu_ids = alloc<int32_t>(rows, 1);
  ASSERT_TRUE(gpu_->argmax(same.gpu, gpu_ids.gpu).ok());
  const auto got = gpu_values(gpu_ids.gpu);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = same.cpu.data + r * kVocab;
    EXPECT_EQ(got[static_cast<size_t>(r)], std::max_element(row, row + kVocab) - row) << "row " << r;
  }
  SampleStep step;
  step.params.temperature = 0.8f;
  step.params.top_k = 40;
  step.params.top_p = 0.95f;
  step.u01 = {0.25, 0.75};
  ASSERT_TRUE(cpu_.sample(same.cpu, step, cpu_ids.cpu).ok());
  ASSERT_TRUE(gpu_->sample(same.gpu, step, gpu_ids.gpu).ok());
  EXPECT_EQ(gpu_values(gpu_ids.gpu), cpu_values(cpu_ids.cpu));
}

TEST_F(Llama3Shapes, EmbeddingRowsOfTheWholeVocabulary) {
  const auto table = random_matrix(quant::FormatId::kQ4_K, {kVocab, kHidden}, 7);
  const auto tokens = input_values(std::vector<int32_t>{0, 128000, 128255, 17, 64000}, 5, 1);
  const auto out = output(5, kHidden);
  ASSERT_TRUE(cpu_.embed(table.cpu, tokens.cpu, out.cpu).ok());
  ASSERT_TRUE(gpu_->embed(table.gpu, tokens.gpu, out.gpu).ok());
  expect_close(out, 1e-6, "Q4_K embedding [128256, 4096]");
}

// GQA attention with 32 query and 8 KV heads of 128: one query at position 0 (a single key), one at position 4096
// over 4097 keys, and a 16-token prompt chunk at the end of them.
TEST_F(Llama3Shapes, AttentionAtOneAnd4097Positions) {
  const int64_t capacity = 4097, kv_dim = int64_t{kKvHeads} * kHeadDim, q_dim = int64_t{kHeads} * kHeadDim;
  const auto k = input(capacity, kv_dim, 8), v = input(capacity, kv_dim, 9);
  std::vector<int32_t> pos(static_cast<size_t>(capacity));
  for (int64_t i = 0; i < capacity; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const auto positions = input_values(pos, capacity, 1);
  const KvLayerView cpu_cache{k.cpu, v.cpu, positions.cpu, {}}, gpu_cache{k.gpu, v.gpu, positions.gpu, {}};
  const AttentionParams p{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(static_cast<float>(kHeadDim)), 0};
  struct Case {
    int64_t first_position, tokens, keys;
  };
  for (const Case& c : {Case{0, 1, 1}, Case{4096, 1, 4097}, Case{4081, 16, 4097}}) {
    const auto q = input(c.tokens, q_dim, 10 + c.tokens);
    const auto out = output(c.tokens, q_dim);
    const ConstI32View cq = positions.cpu.row_range(c.first_position, c.tokens);
    const ConstI32View gq = positions.gpu.row_range(c.first_position, c.tokens);
    const auto keys = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    ASSERT_TRUE(cpu_.attention(q.cpu, cq, cpu_cache, keys.cpu, p, out.cpu).ok());
    ASSERT_TRUE(gpu_->attention(q.gpu, gq, gpu_cache, keys.gpu, p, out.gpu).ok());
    expect_close(out, 1e-5, "attention at position " + std::to_string(c.first_position) + ", " +
                                std::to_string(c.tokens) + " tokens over " + std::to_string(c.keys) + " keys");
  }
}

// RoPE with Llama 3's base over 4097 positions, then the row-wise ops at the model's widths.
TEST_F(Llama3Shapes, RopeNormsAndElementwiseOps) {
  const int64_t tokens = 4097;
  std::vector<float> inv(kHeadDim / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / kHeadDim));
  const auto inv_freq = input_values(inv, kHeadDim / 2, 1);
  std::vector<int32_t> pos(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const auto positions = input_values(pos, tokens, 1);
  const auto x = input(tokens, int64_t{kKvHeads} * kHeadDim, 11);
  const RopeParams cp{RopeLayout::kHalfSplit, kHeadDim, kHeadDim, 1.0f, inv_freq.cpu};
  const RopeParams gp{RopeLayout::kHalfSplit, kHeadDim, kHeadDim, 1.0f, inv_freq.gpu};
  ASSERT_TRUE(cpu_.rope(x.cpu, kKvHeads, positions.cpu, cp).ok());
  ASSERT_TRUE(gpu_->rope(x.gpu, kKvHeads, positions.gpu, gp).ok());
  expect_close(x, 1e-5, "rope of 8 KV heads over 4097 positions");

  const auto h = input(9, kHidden, 12);
  const auto norm_w = f32_weight({kHidden}, 13, 0.1f, 1.0f);
  const auto normed = output(9, kHidden);
  ASSERT_TRUE(cpu_.rms_norm(h.cpu, norm_w.cpu, 1e-5f, normed.cpu).ok());
  ASSERT_TRUE(gpu_->rms_norm(h.gpu, norm_w.gpu, 1e-5f, normed.gpu).ok());
  expect_close(normed, 1e-5, "rms_norm [9, 4096]");
  const auto gate = input(9, kFfn, 14, 3.0f), up = input(9, kFfn, 15);
  const auto act = output(9, kFfn);
  ASSERT_TRUE(cpu_.silu_mul(gate.cpu, up.cpu, act.cpu).ok());
  ASSERT_TRUE(gpu_->silu_mul(gate.gpu, up.gpu, act.gpu).ok());
  expect_close(act, 1e-5, "silu_mul [9, 14336]");
  const auto sum = output(9, kHidden);
  ASSERT_TRUE(cpu_.add(h.cpu, normed.cpu, sum.cpu).ok());
  ASSERT_TRUE(gpu_->add(h.gpu, normed.gpu, sum.gpu).ok());
  expect_close(sum, 1e-6, "add [9, 4096]");
}

// A Mixtral-shaped MoE layer at these widths: 8 experts routed top-2, two of them stored (the expert kernel reads
// only the selected ones), each [14336, 4096].
TEST_F(Llama3Shapes, MixtureOfExpertsAtTheFfnWidth) {
  const int64_t tokens = 3, experts = 8, top_k = 2;
  const auto router_logits = input(tokens, experts, 16, 2.0f);
  auto ids = alloc<int32_t>(tokens, top_k);
  const auto weights = output(tokens, top_k);
  ASSERT_TRUE(cpu_.moe_route(router_logits.cpu, true, ids.cpu, weights.cpu).ok());
  ASSERT_TRUE(gpu_->moe_route(router_logits.gpu, true, ids.gpu, weights.gpu).ok());
  EXPECT_EQ(gpu_values(ids.gpu), cpu_values(ids.cpu));
  expect_close(weights, 1e-6, "moe_route of 8 experts");
  // Two stored experts; the slots pick among them.
  const auto stack = random_matrix(quant::FormatId::kQ8_0, {2, kFfn, kHidden}, 17);
  const auto picks = input_values(std::vector<int32_t>{1, 0, 0, 0, 1, 1}, tokens, top_k);
  const auto x = input(tokens, kHidden, 18);
  const auto y = output(tokens * top_k, kFfn);
  ASSERT_TRUE(cpu_.linear_experts(x.cpu, stack.cpu, picks.cpu, y.cpu).ok());
  ASSERT_TRUE(gpu_->linear_experts(x.gpu, stack.gpu, picks.gpu, y.gpu).ok());
  // Three tokens' x fits the GEMV batch: the integer-dot expert kernel, on x quantized to two int8 limbs.
  expect_close(y, kIntegerGemvTolerance, "Q8_0 experts [2, 14336, 4096]");
  const auto ys = input(tokens * top_k, kHidden, 19);
  const auto combined = output(tokens, kHidden);
  ASSERT_TRUE(cpu_.moe_combine(ys.cpu, weights.cpu, combined.cpu).ok());
  ASSERT_TRUE(gpu_->moe_combine(ys.gpu, weights.gpu, combined.gpu).ok());
  expect_close(combined, 1e-6, "moe_combine [3, 4096]");
}

}  // namespace
}  // namespace qrt
