// Every architecture's features in every format family: a tiny random model per architecture (what distinguishes
// llama, llama 3 with GGUF's interleaved RoPE, mistral, qwen2, qwen3, mixtral, qwen3moe, phi3, gemma2, gemma3,
// gpt-oss and deepseek2/3 in ModelConfig),
// every matrix in the format under test, run on the CUDA backend and on the CPU backend
// over the same packed bytes. Widths are 256, so every format's blocks fit. Tolerance: relative L2 <= 1e-4 between
// the logits, the bound the tiny-model tests use (fp32 on the device against the reference's accumulations; both
// decode the same bytes, so quantization error cancels); the integer-dot decode GEMVs get their own, looser bound.
#include <list>
#include <memory>

#include "architectures.hpp"
#include "backend_pair.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "tiny_model.hpp"

namespace qrt {
namespace {

class CudaArchitectures : public test::BackendPair, public testing::WithParamInterface<quant::FormatId> {
 protected:
  // Whether the format's decode GEMV quantizes x at this width (a well-aligned stand-in for the model's weights).
  static bool gemv_dp4a_applies_somewhere(quant::FormatId format, int64_t cols) {
    return kernels::gemv_dp4a_applies(format, integer_gemv_probe(cols));
  }
};

// Every architecture in one format per kernel family; in the other formats the architectures whose matrices
// reach the format's kernels differently: dense projections (llama), expert stacks (qwen3moe) and row views into
// fused tensors (phi3). The rest (biases, q/k norms, windows, RoPE variants) do not depend on the weights' format.
// Gemma's, gpt-oss's and DeepSeek's features (norm forms, activations, soft-caps, sinks, expert biases, latent
// attention, routing) meet the weights only through the same linear ops, so they run in four of those formats:
// dense, GGML blocks old and K, and gpt-oss's own MXFP4.
bool runs_newer_architectures(quant::FormatId f) {
  using quant::FormatId;
  return f == FormatId::kF32 || f == FormatId::kQ8_0 || f == FormatId::kQ4_K || f == FormatId::kMXFP4;
}

bool runs_every_architecture(quant::FormatId f) {
  using quant::FormatId;
  return f == FormatId::kF32 || f == FormatId::kBF16 || f == FormatId::kQ8_0 || f == FormatId::kQ4_K ||
         f == FormatId::kIQ4_NL || f == FormatId::kIQ2_XXS || f == FormatId::kTQ2_0 || f == FormatId::kAFQ4 ||
         f == FormatId::kMXFP4 || f == FormatId::kNVFP4 || f == FormatId::kFP8 || f == FormatId::kHQQ4 ||
         f == FormatId::kF8Q8;
}

TEST_P(CudaArchitectures, LogitsMatchTheCpuBackend) {
  const quant::FormatId format = GetParam();
  for (const test::Architecture& arch : test::architectures()) {
    if (!runs_every_architecture(format) && arch.name != "llama" && arch.name != "qwen3moe" && arch.name != "phi3")
      continue;
    const bool newer = arch.name == "gemma2" || arch.name == "gemma3" || arch.name == "gpt-oss" ||
                       arch.name == "deepseek2" || arch.name == "deepseek3";
    if (newer && !runs_newer_architectures(format)) continue;
    SCOPED_TRACE(arch.name + " in " + std::string(quant::format_name(format)));
    test::TinyModel m = test::make_tiny_model(arch.config);
    // Every matrix in the format (stacks of experts one expert at a time); norms and biases stay F32.
    const std::list<std::unique_ptr<test::OwnedTensor>> packed = test::quantize_matrices(m.tensors, format);
    ASSERT_FALSE(HasFailure());
    // An f32 KV cache on both: with the CUDA default (f16), a key whose fp32 value differs by an ulp between the
    // backends can round to neighbouring f16 values (2^-11 apart), more than this bound allows; the 16-bit caches
    // are compared in kv_cache_types_test.cpp and model_test.cpp.
    TransformerOptions options;
    options.kv_type = KvType::kF32;
    auto cpu_model = Transformer::create(cpu_, m.config, m.tensors, options);
    ASSERT_TRUE(cpu_model.ok()) << cpu_model.status().to_string();
    auto gpu_model = Transformer::create(*gpu_, m.config, m.tensors, options);
    ASSERT_TRUE(gpu_model.ok()) << gpu_model.status().to_string();
    // First with every decode GEMV on fp32 x (the tight bound holds for the whole model), then, for the formats
    // whose decode GEMV quantizes x to two int8 limbs, that default path: about 2e-5 per projection (checked per
    // kernel in gemv_dp4a_test), grown through the layers, saturated softmaxes and near-tied MoE routing to 6e-5 in
    // the logits for Q4_0/Q4_K, 1.1e-3 for qwen2 in IQ4_NL and 4.5e-3 for mixtral in IQ3_XXS (the most, measured
    // under SIMT over every format); a wrong kernel gives O(1).
    const bool integer = gemv_dp4a_applies_somewhere(format, m.config.hidden);
    for (bool integer_gemv : integer ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      SCOPED_TRACE(integer_gemv ? "integer-dot GEMV" : "float GEMV");
      gpu_->set_integer_gemv(integer_gemv);
      const double bound = integer_gemv ? 1e-2 : 1e-4;
      auto cpu_seq = (*cpu_model)->new_sequence(16);
      auto gpu_seq = (*gpu_model)->new_sequence(16);
      ASSERT_TRUE(cpu_seq.ok() && gpu_seq.ok());
      const std::vector<int32_t> tokens = {3, 17, 42, 8, 8, 29, 1, 44, 12};
      std::vector<float> want, got;
      // A 7-token prompt with every position's logits, then two decode steps.
      ASSERT_TRUE((*cpu_model)->forward(**cpu_seq, std::span(tokens).first(7), LogitsFor::kAll, &want).ok());
      const Status s = (*gpu_model)->forward(**gpu_seq, std::span(tokens).first(7), LogitsFor::kAll, &got);
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (float v : want) ASSERT_TRUE(std::isfinite(v)) << "the reference logits are not finite";
      EXPECT_LE(test::relative_l2(got.data(), want.data(), want.size()), bound) << "prompt";
      for (size_t i = 7; i < tokens.size(); ++i) {
        ASSERT_TRUE((*cpu_model)->forward(**cpu_seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &want).ok());
        ASSERT_TRUE((*gpu_model)->forward(**gpu_seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &got).ok());
        EXPECT_LE(test::relative_l2(got.data(), want.data(), want.size()), bound) << "decode step " << i;
      }
    }
    gpu_->set_integer_gemv(true);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaArchitectures, testing::ValuesIn(quant::kAllFormats), test::format_test_name);

}  // namespace
}  // namespace qrt
