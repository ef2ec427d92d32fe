// Whole models on the CUDA backend: the tiny random models of the CPU model tests give the CPU backend's logits
// (a 40-token prompt through the cuBLAS path, then single-token steps through the GEMV path and the KV cache; with
// heads of 64, the prompt's attention on the register tensor-core kernel over f16 and fp8 caches), and the real
// stories260K GGUF reproduces llama2.c's greedy continuation.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <list>
#include <optional>
#include <sstream>

#include "backend_pair.hpp"
#include "decode_batch_check.hpp"
#include "paged_sequence_check.hpp"
#include "requantize.hpp"
#include "loader/gguf.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "stories_golden.hpp"
#include "tiny_model.hpp"

namespace qrt {
namespace {

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 17 + 5) % vocab;
  return t;
}


struct TinyCase {
  std::string name;
  ModelConfig config;
  quant::FormatId format = quant::FormatId::kF32;
  // The KV cache type of both backends; empty: the CUDA backend's default (f16), which the CPU is then given.
  std::optional<KvType> kv_type;
};

std::vector<TinyCase> tiny_cases() {
  std::vector<TinyCase> cases;
  ModelConfig c = test::tiny_llama_config();
  cases.push_back({"llama_gqa", c, quant::FormatId::kF32, std::nullopt});
  ModelConfig moe = c;
  moe.experts = 4;
  moe.experts_used = 2;
  moe.expert_ffn = 32;
  moe.qk_norm = true;
  moe.attention_bias = true;
  cases.push_back({"moe_qk_norm_bias", moe, quant::FormatId::kF32, KvType::kF32});
  ModelConfig window = c;
  window.sliding_window = 4;
  window.rope.layout = RopeLayout::kInterleaved;
  window.tied_embeddings = true;
  cases.push_back({"sliding_window_interleaved_tied", window, quant::FormatId::kF32, KvType::kBF16});
  ModelConfig wide = c;  // rows of 64 and 128: whole Q8_0 blocks everywhere
  wide.hidden = 64;
  wide.heads = 4;
  wide.kv_heads = 2;
  wide.head_dim = 16;
  wide.ffn = 128;
  wide.experts = 4;
  wide.experts_used = 2;
  wide.expert_ffn = 64;
  wide.mlp_bias = false;
  cases.push_back({"q8_0_moe", wide, quant::FormatId::kQ8_0, std::nullopt});
  cases.push_back({"llama_fp8_cache", c, quant::FormatId::kF32, KvType::kFp8});
  ModelConfig dense_wide = wide;  // cache rows of 2 x 16: one Q8_0 block
  dense_wide.experts = dense_wide.experts_used = dense_wide.expert_ffn = 0;
  cases.push_back({"llama_q8_0_cache", dense_wide, quant::FormatId::kF32, KvType::kQ8_0});
  ModelConfig hd64 = c;  // heads of 64: the 40-token prompt's attention on the register tensor-core kernel
  hd64.hidden = 256;
  hd64.heads = 4;
  hd64.kv_heads = 2;
  hd64.head_dim = 64;
  hd64.ffn = 128;
  cases.push_back({"llama_head_dim_64", hd64, quant::FormatId::kF32, std::nullopt});
  cases.push_back({"llama_head_dim_64_fp8_cache", hd64, quant::FormatId::kF32, KvType::kFp8});
  return cases;
}

// The tiny model of a case, its matrices re-packed in the case's format (`storage` keeps the packed bytes).
test::TinyModel tiny_model_of(const TinyCase& tc, std::list<quant::QuantBuffers>& storage) {
  test::TinyModel m = test::make_tiny_model(tc.config);
  if (tc.format != quant::FormatId::kF32) test::requantize(m, tc.format, storage);
  return m;
}

class CudaModel : public test::BackendPair {};

TEST_F(CudaModel, TinyModelsMatchCpuLogits) {
  for (const TinyCase& tc : tiny_cases()) {
    SCOPED_TRACE(tc.name);
    std::list<quant::QuantBuffers> storage;
    test::TinyModel m = tiny_model_of(tc, storage);
    ASSERT_FALSE(HasFatalFailure());
    TransformerOptions cpu_options, gpu_options;
    cpu_options.kv_type = tc.kv_type.value_or(KvType::kF16);
    gpu_options.kv_type = tc.kv_type;
    auto cpu_model = Transformer::create(cpu_, m.config, m.tensors, cpu_options);
    ASSERT_TRUE(cpu_model.ok()) << cpu_model.status().to_string();
    auto gpu_model = Transformer::create(*gpu_, m.config, m.tensors, gpu_options);
    ASSERT_TRUE(gpu_model.ok()) << gpu_model.status().to_string();
    EXPECT_EQ((*gpu_model)->kv_type(), cpu_options.kv_type) << "the CUDA backend's default is f16";
    auto cpu_seq = (*cpu_model)->new_sequence(48);
    auto gpu_seq = (*gpu_model)->new_sequence(48);
    ASSERT_TRUE(cpu_seq.ok() && gpu_seq.ok());
    const auto tokens = some_tokens(44, m.config.vocab_size);
    std::vector<float> want, got;
    // The prompt: 40 rows (the dequantize + cuBLAS path), logits of every position.
    const std::span<const int32_t> prompt = std::span(tokens).first(40);
    ASSERT_TRUE((*cpu_model)->forward(**cpu_seq, prompt, LogitsFor::kAll, &want).ok());
    Status s = (*gpu_model)->forward(**gpu_seq, prompt, LogitsFor::kAll, &got);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(got.size(), want.size());
    // The prompt's projections round their inputs to fp16 (kGemmTolerance), and so do the K and V rows the decode
    // steps then attend to; the steps' own arithmetic is fp32. Both caches round K and V to the same type; in an fp8
    // cache a K or V element that the fp16 GEMM moved by an ulp can cross an fp8 rounding boundary (a 2^-4 step), in a
    // q8_0 cache a code boundary (1/127 of the block's largest element).
    const bool coarse = tc.kv_type == KvType::kFp8 || tc.kv_type == KvType::kQ8_0;
    const double bound = coarse ? 1e-2 : kGemmTolerance;
    EXPECT_LE(test::relative_l2(got.data(), want.data(), got.size()), bound) << "prompt logits";
    // Decode steps: one row each (the GEMV path, split attention), attending to the cached prompt.
    for (size_t i = 40; i < tokens.size(); ++i) {
      ASSERT_TRUE((*cpu_model)->forward(**cpu_seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &want).ok());
      ASSERT_TRUE((*gpu_model)->forward(**gpu_seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &got).ok());
      ASSERT_EQ(got.size(), static_cast<size_t>(m.config.vocab_size));
      EXPECT_LE(test::relative_l2(got.data(), want.data(), got.size()), bound) << "decode step " << i;
    }
    // A 3-token batch (the GEMV path at batch 3) after a reset.
    (*cpu_seq)->reset();
    (*gpu_seq)->reset();
    ASSERT_TRUE((*cpu_model)->forward(**cpu_seq, std::span(tokens).first(3), LogitsFor::kAll, &want).ok());
    ASSERT_TRUE((*gpu_model)->forward(**gpu_seq, std::span(tokens).first(3), LogitsFor::kAll, &got).ok());
    // Every projection there, the experts' too, on x quantized to two int8 limbs (about 2e-5 each), compounded
    // through the layers (measured under the SIMT layer: up to 1.3e-4, q8_0_moe).
    EXPECT_LE(test::relative_l2(got.data(), want.data(), got.size()), 3e-4) << "batch of 3";
  }
}

// Several sequences decoding together on the CUDA backend equal each decoding alone (which runs its captured
// one-token graph): up to 8 rows the GEMVs take every row at once with per-row sums in the same order as one row;
// 11 rows go through the fp16 tensor-core GEMM, which rounds its inputs to fp16. Paged sequences: the KV write
// through the slots' pool rows, every attention kernel through the block table (prompt chunks on the tensor-core
// kernel for 16-bit caches, decode on the split kernel), reused prefix blocks, and decode_batch over sequences
// whose blocks interleave in one pool, and one pass mixing decode tokens with prompt chunks.
TEST_F(CudaModel, DecodeBatchAndPagedSequencesEqualEachSequenceAlone) {
  for (const TinyCase& tc : tiny_cases()) {
    SCOPED_TRACE(tc.name);
    std::list<quant::QuantBuffers> storage;
    test::TinyModel m = tiny_model_of(tc, storage);
    ASSERT_FALSE(HasFatalFailure());
    TransformerOptions options;
    options.kv_type = tc.kv_type;
    auto model = Transformer::create(*gpu_, m.config, m.tensors, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    EXPECT_LT(test::check_decode_batch(**model, 3, 3), 1e-5);  // measured under the SIMT layer: 0
    EXPECT_LT(test::check_decode_batch(**model, 11, 2), 1e-2);  // measured: 6.7e-4 .. 2.4e-3 (bf16 cache)
    // Prompts of more than 8 rows go through the fp16 GEMM, whose rows a reused prefix computed in other batches.
    EXPECT_LT(test::check_paged_sequences(**model, 8), 1e-2);
    auto pool = (*model)->new_kv_pool(32, 4);
    ASSERT_TRUE(pool.ok()) << pool.status().to_string();
    EXPECT_LT(test::check_decode_batch(**model, 3, 3, pool->get()), 1e-5);
    // Decode tokens and prompt chunks in one pass (the output head on the gathered last rows): 12 rows take the
    // fp16 GEMM, which the twins' own passes of 7 and 3 rows do not; in an fp8 cache a K or V element the GEMM moved
    // by an ulp can land a 2^-4 step away (measured under the SIMT layer: 2.0e-2 with fp8).
    const bool coarse = tc.kv_type == KvType::kFp8 || tc.kv_type == KvType::kQ8_0;
    EXPECT_LT(test::check_mixed_step(**model, pool->get()), coarse ? 5e-2 : 1e-2);
  }
}

// The two sources of activation memory (cuda_context.hpp) give bit-identical logits: the same kernels in the same
// order, only the addresses differ. Under gpu-sim the stream-ordered frees land in stream order, so a buffer used
// after its release would fault there.
TEST(CudaAllocators, StreamOrderedAndPooledMemoryGiveTheSameLogits) {
  QRT_REQUIRE_GPU();
  auto m = test::make_tiny_model(tiny_cases()[1].config);  // MoE, qk norm, biases
  const auto tokens = some_tokens(44, m.config.vocab_size);
  std::vector<std::vector<float>> logits;
  for (DeviceAllocator allocator : {DeviceAllocator::kCachingPool, DeviceAllocator::kStreamOrdered}) {
    SCOPED_TRACE(device_allocator_name(allocator));
    auto gpu = CudaBackend::create(0, nullptr, allocator);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    {
      auto model = Transformer::create(**gpu, m.config, m.tensors);
      ASSERT_TRUE(model.ok()) << model.status().to_string();
      auto seq = (*model)->new_sequence(48);
      ASSERT_TRUE(seq.ok());
      std::vector<float> out, step;
      ASSERT_TRUE((*model)->forward(**seq, std::span(tokens).first(40), LogitsFor::kAll, &out).ok());
      for (size_t i = 40; i < tokens.size(); ++i) {
        ASSERT_TRUE((*model)->forward(**seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &step).ok());
        out.insert(out.end(), step.begin(), step.end());
      }
      logits.push_back(std::move(out));
    }
    ASSERT_TRUE((*gpu)->synchronize().ok());
    EXPECT_EQ((*gpu)->live_allocations(), 0u);
  }
  ASSERT_EQ(logits.size(), 2u);
  EXPECT_EQ(logits[0], logits[1]);
}

TEST_F(CudaModel, Stories260KGgufReproducesGoldenGreedy) {
  QRT_REQUIRE_TEST_DATA(data);
  const test::StoriesGolden golden = test::read_stories_golden(data);
  ASSERT_EQ(golden.generated.size(), 60u);
  auto gguf = open_gguf((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto config = arch::config_from_gguf(arch::GgufMetadataView(gguf->metadata()));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto canonical = names::canonicalize(gguf->tensors, names::NameScheme::kGguf);
  ASSERT_TRUE(canonical.ok()) << canonical.status().to_string();
  arch::apply_tensor_presence(canonical->tensors, &*config);
  auto model = Transformer::create(*gpu_, *config, canonical->tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const WeightLoadStats& load = gpu_->load_stats();
  std::printf("[ load     ] stories260K: %u tensors, %.2f MB in %.4f s (%.2f GB/s) on %s\n", load.tensors,
              load.bytes / 1e6, load.seconds, load.gb_per_s(), gpu_->device_props().name.c_str());

  auto seq = (*model)->new_sequence(static_cast<int64_t>(golden.prompt.size() + golden.generated.size()));
  ASSERT_TRUE(seq.ok()) << seq.status().to_string();
  std::vector<float> logits;
  ASSERT_TRUE((*model)->forward(**seq, golden.prompt, LogitsFor::kLast, &logits).ok());
  std::vector<int32_t> out;
  for (size_t step = 0; step < golden.generated.size(); ++step) {
    const auto best = std::max_element(logits.begin(), logits.end());
    if (step == 0) {
      EXPECT_NEAR(*best, golden.first_max_logit, 1e-3 * std::fabs(golden.first_max_logit));
    }
    const int32_t next = static_cast<int32_t>(best - logits.begin());
    out.push_back(next);
    if (step + 1 < golden.generated.size()) {
      Status s = (*model)->forward(**seq, std::span(&next, 1), LogitsFor::kLast, &logits);
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.to_string();
    }
  }
  EXPECT_EQ(out, golden.generated);
}

}  // namespace
}  // namespace qrt
