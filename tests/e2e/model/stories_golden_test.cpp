// The real stories260K model (Llama architecture, trained) must reproduce llama2.c's greedy continuation of
// "Once upon a time" (data/stories260K/golden_greedy_once_upon_a_time.txt), from the Hugging Face checkpoint
// (half-split RoPE, tied embeddings) and from the GGUF file (interleaved RoPE on permuted Q/K rows), through the
// whole path: loader -> arch config -> canonical names -> transformer on the CPU backend.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/gguf.hpp"
#include "loader/safetensors.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "backend/cpu_backend.hpp"
#include "stories_golden.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

// Greedy decoding: the prompt as one batch, then one token at a time through the KV cache.
void expect_golden(Transformer& model, const test::StoriesGolden& g) {
  auto seq = model.new_sequence(static_cast<int64_t>(g.prompt.size() + g.generated.size()));
  ASSERT_TRUE(seq.ok()) << seq.status().to_string();
  std::vector<float> logits;
  ASSERT_TRUE(model.forward(**seq, g.prompt, LogitsFor::kLast, &logits).ok());
  std::vector<int32_t> out;
  for (size_t step = 0; step < g.generated.size(); ++step) {
    const auto best = std::max_element(logits.begin(), logits.end());
    if (step == 0) {
      EXPECT_NEAR(*best, g.first_max_logit, 1e-4 * std::fabs(g.first_max_logit));
    }
    const int32_t next = static_cast<int32_t>(best - logits.begin());
    out.push_back(next);
    if (step + 1 < g.generated.size()) {
      ASSERT_TRUE(model.forward(**seq, std::span(&next, 1), LogitsFor::kLast, &logits).ok());
    }
  }
  EXPECT_EQ(out, g.generated);
}

TEST(Stories260K, HuggingFaceCheckpointReproducesGoldenGreedy) {
  QRT_REQUIRE_TEST_DATA(data);
  const test::StoriesGolden golden = test::read_stories_golden(data);
  ASSERT_EQ(golden.generated.size(), 60u);  // as recorded (the header says 64 steps in all)
  const auto dir = data / "stories260K-hf";
  std::ifstream cfg_in(dir / "config.json");
  auto config = arch::config_from_hf(nlohmann::json::parse(cfg_in));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_TRUE(config->tied_embeddings);
  auto file = read_safetensors((dir / "model.safetensors").string());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  TensorTable tensors;
  for (const auto& e : file->entries) {
    auto t = dense_quant_tensor(e, file->path);
    ASSERT_TRUE(t.ok());
    tensors[e.name] = *t;
  }
  auto canonical = names::canonicalize(tensors, names::NameScheme::kHuggingFace);
  ASSERT_TRUE(canonical.ok()) << canonical.status().to_string();
  CpuBackend backend;
  auto model = Transformer::create(backend, *config, canonical->tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_golden(**model, golden);
}

TEST(Stories260K, GgufReproducesGoldenGreedy) {
  QRT_REQUIRE_TEST_DATA(data);
  const test::StoriesGolden golden = test::read_stories_golden(data);
  auto gguf = open_gguf((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto config = arch::config_from_gguf(arch::GgufMetadataView(gguf->metadata()));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->rope.layout, RopeLayout::kInterleaved);
  auto canonical = names::canonicalize(gguf->tensors, names::NameScheme::kGguf);
  ASSERT_TRUE(canonical.ok()) << canonical.status().to_string();
  arch::apply_tensor_presence(canonical->tensors, &*config);
  CpuBackend backend;
  auto model = Transformer::create(backend, *config, canonical->tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_golden(**model, golden);
}

}  // namespace
}  // namespace qrt
