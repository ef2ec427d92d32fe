// linear() through the int8 tensor-core GEMM (CudaBackend::set_mma_gemm; QRT_CUDA_MMA=1) against the CPU backend:
// batches of 2..256 rows on the formats with a policy (two int8 limbs of x, as the integer-dot GEMV: within
// kIntegerGemvTolerance), prompts above 256 rows in chunks of 256, one rearrangement of the quantized input shared by
// the projections reading it (q/k/v through linear_same_input), the norm's fused quantization reused for up to 256
// rows, and the other paths where it does not apply (one row, Q4_1, a backend whose buffers were sized before it was
// switched on); then whole models (a dense and a MoE architecture in Q4_K and Q8_0): a prompt and a batched decode step
// of four sequences.
#include <cmath>
#include <cstdlib>
#include <list>
#include <span>
#include <string>

#include "architectures.hpp"
#include "backend_pair.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "models/transformer.hpp"
#include "tiny_model.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

class CudaMmaGemm : public test::BackendPair {
 protected:
  test::DualWeight make(quant::FormatId f, int64_t out, int64_t in, uint64_t seed) {
    auto w = test::quantized_tensor(f, {out, in}, test::random_normal(static_cast<size_t>(out * in), seed),
                                    test::default_params(f));
    owned_.push_back(std::move(w));
    return weight(owned_.back()->tensor);
  }
  // Runs fn on the GPU and returns the kernels it launched (0 outside the SIMT layer, where nothing counts them).
  template <class F>
  uint64_t launches(F&& fn) {
#if defined(QRT_SIMT)
    const simt::StreamCounters start = simt::device_counters(0);
    fn();
    return (simt::device_counters(0) - start).kernel_launches;
#else
    fn();
    return 0;
#endif
  }
  std::vector<std::unique_ptr<test::OwnedTensor>> owned_;
};

TEST_F(CudaMmaGemm, EveryBatchAndFormatMatchesCpu) {
  gpu_->set_mma_gemm(true);  // before the uploads, which size the activation buffers
  const int64_t out = 75, in = 512;  // 75 rows: the last 32-row block holds 11
  uint64_t seed = 3300;
  for (quant::FormatId f : {quant::FormatId::kQ4_0, quant::FormatId::kQ8_0, quant::FormatId::kQ4_K,
                            quant::FormatId::kQ5_K, quant::FormatId::kQ6_K, quant::FormatId::kIQ4_NL,
                            quant::FormatId::kMXFP4_GGML, quant::FormatId::kMXFP4, quant::FormatId::kQ3_K,
                            quant::FormatId::kQ4_1, quant::FormatId::kQ5_0, quant::FormatId::kQ5_1,
                            quant::FormatId::kQ2_K, quant::FormatId::kIQ4_XS, quant::FormatId::kTQ2_0,
                            quant::FormatId::kNVFP4, quant::FormatId::kIQ3_S, quant::FormatId::kIQ2_XS,
                            quant::FormatId::kIQ1_M, quant::FormatId::kAFQ4, quant::FormatId::kAFQ8,
                            quant::FormatId::kAFQ3, quant::FormatId::kTQ1_0, quant::FormatId::kFP8}) {
    const auto w = make(f, out, in, ++seed);
    const bool mma = f != quant::FormatId::kFP8;  // no policy: the staged float GEMV, then cuBLAS
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{8}, int64_t{9}, int64_t{32}, int64_t{33}, int64_t{64},
                      int64_t{100}}) {
      const std::string what = std::string(quant::format_name(f)) + " batch " + std::to_string(n);
      const auto x = input(n, in, ++seed);
      const auto y = output(n, out);
      ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok());
      const uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).ok()); });
      const bool tensor_cores = mma && n >= 2;
      // Quantize, rearrange, then up to 32 batch rows one GEMM per 32 (16 for Q6_K, Q3_K, Q2_K, NVFP4 and the grid
      // i-quants, 24 for IQ4_NL and Q5_1: launch_tiles in gemm_q8_mma_block.cuh), above that one shared-memory GEMM.
      const bool half_scales = f == quant::FormatId::kQ6_K || f == quant::FormatId::kQ3_K ||
                               f == quant::FormatId::kQ2_K || f == quant::FormatId::kNVFP4 ||
                               f == quant::FormatId::kIQ3_S || f == quant::FormatId::kIQ2_XS ||
                               f == quant::FormatId::kIQ1_M;
      const bool three = f == quant::FormatId::kIQ4_NL || f == quant::FormatId::kQ5_1;
      const int64_t per_launch = half_scales ? 16 : three ? 24 : 32;
      if (kCounted && tensor_cores) {
        const int64_t gemms = n >= kernels::kMmaTallMinBatch ? 1 : (n + per_launch - 1) / per_launch;
        EXPECT_EQ(ran, 2u + static_cast<uint64_t>(gemms)) << what;
      }
      expect_close(y, tensor_cores || n <= kernels::kGemvMaxBatch ? kIntegerGemvTolerance : kGemmTolerance, what);
    }
  }
}

// A prompt of more than kernels::kMmaMaxBatch rows (the activation buffers' size) runs in chunks of that many: each
// quantized, rearranged and multiplied, the outputs in place.
TEST_F(CudaMmaGemm, PromptsAboveTheBufferRunInChunks) {
  gpu_->set_mma_gemm(true);
  const int64_t out = 70, in = 384, n = kernels::kMmaMaxBatch + 70;  // the second chunk in two 64-row blocks
  for (quant::FormatId f : {quant::FormatId::kQ8_0, quant::FormatId::kQ5_1}) {
    const std::string what = std::string(quant::format_name(f)) + " batch " + std::to_string(n);
    const test::DualWeight w = make(f, out, in, 3700 + static_cast<uint64_t>(f));
    const auto x = input(n, in, 3710 + static_cast<uint64_t>(f));
    const auto y = output(n, out);
    ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok());
    const uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).ok()); });
    if (kCounted) {
      EXPECT_EQ(ran, 2u * 3u) << what << ": quantize, rearrange and one GEMM per chunk";
    }
    expect_close(y, kIntegerGemvTolerance, what);
  }
}

// A backend holding only a matrix with a tensor-core policy and no integer-dot GEMV (AFQ3) sizes the quantized-x and
// tile buffers at its upload: with set_mma_gemm its batches take the tensor cores, not the float fallbacks.
TEST_F(CudaMmaGemm, AFormatWithoutAnIntegerDotGemvReservesTheBuffers) {
  gpu_->set_mma_gemm(true);
  const int64_t out = 40, in = 256;
  const test::DualWeight w = make(quant::FormatId::kAFQ3, out, in, 3750);
  for (const int64_t n : {int64_t{4}, int64_t{72}}) {  // the small-batch block, the shared-memory one
    const std::string what = "AFQ3 batch " + std::to_string(n);
    const auto x = input(n, in, 3751 + n);
    const auto y = output(n, out);
    ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok());
    const uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).ok()); });
    if (kCounted) {
      EXPECT_EQ(ran, 3u) << what << ": quantize, rearrange, one GEMM";
    }
    expect_close(y, kIntegerGemvTolerance, what);
  }
}

// With min_rows 1 (QRT_CUDA_MMA=all) a single row takes the tensor cores too, with the GEMV's result within the
// integer-dot tolerance of the CPU.
TEST_F(CudaMmaGemm, SingleRowsWhenAsked) {
  gpu_->set_mma_gemm(true, 1);
  const test::DualWeight w = make(quant::FormatId::kQ4_K, 50, 512, 3700);
  const auto x = input(1, 512, 3701);
  const auto y = output(1, 50);
  ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, {}, y.cpu).ok());
  const uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, {}, y.gpu).ok()); });
  if (kCounted) {
    EXPECT_EQ(ran, 3u) << "quantize, rearrange, GEMM (the GEMV path is 2 launches)";
  }
  expect_close(y, kIntegerGemvTolerance, "one row on the tensor cores");
}

// q, k and v from one input: one quantization and one rearrangement, then a GEMM per projection (biases added
// after), each close to the CPU.
TEST_F(CudaMmaGemm, ProjectionsSharingAnInputRearrangeItOnce) {
  gpu_->set_mma_gemm(true);
  const int64_t in = 256, rows = 12;
  const test::DualWeight wq = make(quant::FormatId::kQ4_K, 96, in, 3400);
  const test::DualWeight wk = make(quant::FormatId::kQ4_K, 32, in, 3401);
  const test::DualWeight wv = make(quant::FormatId::kQ4_K, 32, in, 3402);
  const test::DualWeight bias = f32_weight({32}, 3403, 0.5f);
  const auto x = input(rows, in, 3404);
  const auto yq = output(rows, 96), yk = output(rows, 32), yv = output(rows, 32);
  const std::vector<Backend::LinearPart> cpu_parts = {{wq.cpu, {}, yq.cpu}, {wk.cpu, bias.cpu, yk.cpu},
                                                      {wv.cpu, {}, yv.cpu}};
  const std::vector<Backend::LinearPart> gpu_parts = {{wq.gpu, {}, yq.gpu}, {wk.gpu, bias.gpu, yk.gpu},
                                                      {wv.gpu, {}, yv.gpu}};
  ASSERT_TRUE(cpu_.linear_same_input(x.cpu, cpu_parts).ok());
  const uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear_same_input(x.gpu, gpu_parts).ok()); });
  if (kCounted) {
    EXPECT_EQ(ran, 1u + 1u + 3u + 1u) << "quantize, rearrange, three GEMMs, one bias add";
  }
  expect_close(yq, kIntegerGemvTolerance, "q");
  expect_close(yk, kIntegerGemvTolerance, "k + bias");
  expect_close(yv, kIntegerGemvTolerance, "v");
}

// rms_norm writes its output's quantization for up to 256 rows when the tensor-core GEMM is on: the projection after
// it only rearranges and multiplies. An op writing the input in between (an add into it) makes the next GEMM
// quantize and rearrange again.
TEST_F(CudaMmaGemm, TheNormsQuantizationIsReusedUntilTheInputChanges) {
  gpu_->set_mma_gemm(true);
  const int64_t hidden = 256, rows = 32;  // one GEMM launch
  const test::DualWeight w = make(quant::FormatId::kQ8_0, 48, hidden, 3500);
  const test::DualWeight norm_w = f32_weight({hidden}, 3501, 0.3f, 1.0f);
  const auto h = input(rows, hidden, 3502), bump = input(rows, hidden, 3503);
  const auto xn = output(rows, hidden), y = output(rows, 48);
  ASSERT_TRUE(cpu_.rms_norm(h.cpu, norm_w.cpu, 1e-5f, xn.cpu).ok());
  ASSERT_TRUE(gpu_->rms_norm(h.gpu, norm_w.gpu, 1e-5f, xn.gpu).ok());
  ASSERT_TRUE(cpu_.linear(xn.cpu, w.cpu, {}, y.cpu).ok());
  uint64_t ran = launches([&] { ASSERT_TRUE(gpu_->linear(xn.gpu, w.gpu, {}, y.gpu).ok()); });
  if (kCounted) {
    EXPECT_EQ(ran, 1u + 1u) << "rearrange, then one GEMM";
  }
  expect_close(y, kIntegerGemvTolerance, "from the norm's quantized output");
  ASSERT_TRUE(cpu_.add(xn.cpu, bump.cpu, xn.cpu).ok());
  ASSERT_TRUE(gpu_->add(xn.gpu, bump.gpu, xn.gpu).ok());
  ASSERT_TRUE(cpu_.linear(xn.cpu, w.cpu, {}, y.cpu).ok());
  ran = launches([&] { ASSERT_TRUE(gpu_->linear(xn.gpu, w.gpu, {}, y.gpu).ok()); });
  if (kCounted) {
    EXPECT_EQ(ran, 1u + 1u + 1u) << "quantize, rearrange, one GEMM";
  }
  expect_close(y, kIntegerGemvTolerance, "after the input changed");
}

// Switched on after the upload, the buffers are too small for 64 rows: the other kernels run, with their results.
// QRT_CUDA_MMA chooses at creation; other values are refused.
TEST_F(CudaMmaGemm, BuffersSizedBeforeItFallBackAndTheEnvironmentChooses) {
  const int64_t out = 40, in = 256, n = 64;
  const test::DualWeight w = make(quant::FormatId::kQ4_K, out, in, 3600);
  gpu_->set_mma_gemm(true);
  const auto x = input(n, in, 3601);
  const auto y = output(n, out);
  ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, {}, y.cpu).ok());
  ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, {}, y.gpu).ok());
  expect_close(y, kGemmTolerance, "64 rows through cuBLAS");

  for (const char* value : {"0", "1", "all"}) {
    setenv("QRT_CUDA_MMA", value, 1);
    auto backend = CudaBackend::create(0);
    unsetenv("QRT_CUDA_MMA");
    EXPECT_TRUE(backend.ok()) << value << ": " << backend.status().to_string();
  }
  setenv("QRT_CUDA_MMA", "yes", 1);
  auto refused = CudaBackend::create(0);
  unsetenv("QRT_CUDA_MMA");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("QRT_CUDA_MMA=yes: expected 0, 1 or all"), std::string::npos)
      << refused.status().to_string();
}

// A 12-token prompt (every position's logits) and a decode step of four sequences at once run their projections on
// the tensor cores; the logits stay within the integer-dot GEMV's model bound (architectures_test.cpp) of the CPU's.
TEST_F(CudaMmaGemm, ModelsPrefillAndDecodeABatch) {
  gpu_->set_mma_gemm(true);
  for (const test::Architecture& arch : test::architectures()) {
    if (arch.name != "llama" && arch.name != "qwen3moe") continue;
    for (quant::FormatId format : {quant::FormatId::kQ4_K, quant::FormatId::kQ8_0}) {
      SCOPED_TRACE(arch.name + " in " + std::string(quant::format_name(format)));
      test::TinyModel m = test::make_tiny_model(arch.config);
      const std::list<std::unique_ptr<test::OwnedTensor>> packed = test::quantize_matrices(m.tensors, format);
      ASSERT_FALSE(HasFailure());
      TransformerOptions options;
      options.kv_type = KvType::kF32;
      auto cpu_model = Transformer::create(cpu_, m.config, m.tensors, options);
      auto gpu_model = Transformer::create(*gpu_, m.config, m.tensors, options);
      ASSERT_TRUE(cpu_model.ok() && gpu_model.ok());
      constexpr double kBound = 1e-2;
      const std::vector<int32_t> prompt = {3, 17, 42, 8, 8, 29, 1, 44, 12, 5, 30, 2};
      std::vector<std::unique_ptr<Sequence>> cpu_seqs, gpu_seqs;
      for (int s = 0; s < 4; ++s) {
        auto c = (*cpu_model)->new_sequence(32);
        auto g = (*gpu_model)->new_sequence(32);
        ASSERT_TRUE(c.ok() && g.ok());
        const auto tokens = std::span(prompt).first(static_cast<size_t>(s == 0 ? 12 : 3 + s));
        std::vector<float> want, got;
        const LogitsFor which = s == 0 ? LogitsFor::kAll : LogitsFor::kLast;
        ASSERT_TRUE((*cpu_model)->forward(**c, tokens, which, &want).ok());
        const Status st = (*gpu_model)->forward(**g, tokens, which, &got);
        ASSERT_TRUE(st.ok()) << st.to_string();
        for (float v : got) ASSERT_TRUE(std::isfinite(v));
        EXPECT_LE(test::relative_l2(got.data(), want.data(), want.size()), kBound) << "prompt of sequence " << s;
        cpu_seqs.push_back(std::move(*c));
        gpu_seqs.push_back(std::move(*g));
      }
      std::vector<float> want, got;
      const std::vector<int32_t> next = {7, 19, 23, 40};
      for (int s = 0; s < 4; ++s) {
        std::vector<float> one;
        ASSERT_TRUE((*cpu_model)->forward(*cpu_seqs[static_cast<size_t>(s)], std::span(next).subspan(s, 1),
                                          LogitsFor::kLast, &one)
                        .ok());
        want.insert(want.end(), one.begin(), one.end());
      }
      std::vector<Sequence*> seqs;
      for (auto& g : gpu_seqs) seqs.push_back(g.get());
      DecodeBatch batch;
      const Status st = (*gpu_model)->decode_batch(batch, seqs, next, &got);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LE(test::relative_l2(got.data(), want.data(), want.size()), kBound) << "batched decode step";
    }
  }
}

}  // namespace
}  // namespace qrt
