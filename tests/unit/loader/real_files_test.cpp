// The real files in the shared data folder: counts, names, shapes, keys, and the same weights read from the GGUF
// and the safetensors copy of stories260K. (Every key and tensor is compared with gguf-py and the safetensors
// package in tests/oracle/loader/real_files_oracle.py.)
#include <gtest/gtest.h>

#include <cstring>

#include "loader/gguf.hpp"
#include "loader/safetensors.hpp"
#include "loader_test_util.hpp"

namespace qrt {
namespace {

TEST(RealFiles, Stories260KGguf) {
  QRT_REQUIRE_TEST_DATA(data);
  auto m = open_gguf((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const GgufMetadata& md = m->metadata();
  EXPECT_EQ(*md.get_string("general.architecture"), "llama");
  EXPECT_EQ(*md.get_u32("llama.block_count"), 5u);
  EXPECT_EQ(*md.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*md.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*md.get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(*md.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ((*md.get_string_array("tokenizer.ggml.tokens"))->size(), 512u);
  EXPECT_EQ((*md.get_f32_array("tokenizer.ggml.scores"))->size(), 512u);
  EXPECT_EQ(m->tensors.size(), 48u);  // 5 layers x 9 + embeddings, output norm, output
  const QuantTensor& embd = m->tensors.at("token_embd.weight");
  EXPECT_EQ(embd.format, quant::FormatId::kF32);
  EXPECT_EQ(embd.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(m->tensors.at("blk.4.ffn_down.weight").shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(m->tensors.at("blk.0.ffn_gate.weight").shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(m->tensors.at("blk.0.attn_k.weight").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(m->tensors.at("output_norm.weight").shape, (std::vector<int64_t>{64}));
}

// The same weights in two containers: the embeddings and an FFN matrix must be byte-identical (Q/K differ by the
// RoPE row permutation, so they are not compared).
TEST(RealFiles, Stories260KGgufAndSafetensorsAgree) {
  QRT_REQUIRE_TEST_DATA(data);
  auto g = open_gguf((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto st = read_safetensors((data / "stories260K-hf/model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  for (const auto& [gguf_name, hf_name] : std::vector<std::pair<std::string, std::string>>{
           {"token_embd.weight", "model.embed_tokens.weight"},
           {"blk.2.ffn_down.weight", "model.layers.2.mlp.down_proj.weight"},
           {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
           {"output_norm.weight", "model.norm.weight"}}) {
    const QuantTensor& a = g->tensors.at(gguf_name);
    auto e = st->get(hf_name);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    auto b = dense_quant_tensor(**e, st->path);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a.shape, b->shape) << gguf_name;
    ASSERT_EQ(a.data.size, b->data.size) << gguf_name;
    EXPECT_EQ(std::memcmp(a.data.data, b->data.data, a.data.size), 0) << gguf_name;
  }
}

TEST(RealFiles, Stories260KSafetensors) {
  QRT_REQUIRE_TEST_DATA(data);
  auto st = read_safetensors((data / "stories260K-hf/model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->entries.size(), 47u);  // tied embeddings: no lm_head
  EXPECT_EQ(st->find("lm_head.weight"), nullptr);
  for (const SafetensorsEntry& e : st->entries) EXPECT_EQ(e.dtype, quant::ScalarType::kF32) << e.name;
  EXPECT_EQ(st->find("model.layers.4.mlp.up_proj.weight")->shape, (std::vector<int64_t>{172, 64}));
}

TEST(RealFiles, LlamaTinyRandom) {
  QRT_REQUIRE_TEST_DATA(data);
  auto m = open_gguf((data / "llama-2-tiny-random/llama-2-tiny-random.gguf").string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->tensors.size(), 12u);
  EXPECT_EQ(m->tensors.at("token_embd.weight").format, quant::FormatId::kF16);
  EXPECT_EQ(m->tensors.at("token_embd.weight").shape, (std::vector<int64_t>{32000, 8}));
  EXPECT_EQ(m->tensors.at("blk.0.ffn_down.weight").shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ((*m->metadata().get_string_array("tokenizer.ggml.tokens"))->size(), 32000u);
  EXPECT_EQ(*m->metadata().get_string("tokenizer.ggml.model"), "llama");
}

TEST(RealFiles, EveryVocabGguf) {
  QRT_REQUIRE_TEST_DATA(data);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(data / "ggml-vocab")) {
    if (entry.path().extension() != ".gguf") continue;
    ++files;
    auto m = open_gguf(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const GgufMetadata& md = m->metadata();
    EXPECT_TRUE(m->tensors.empty()) << entry.path();
    auto tokens = md.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().to_string();
    EXPECT_GT((*tokens)->size(), 1000u) << entry.path();
    EXPECT_TRUE(md.get_string("tokenizer.ggml.model").ok()) << entry.path();
    if (md.contains("tokenizer.ggml.scores")) {
      EXPECT_EQ((*md.get_f32_array("tokenizer.ggml.scores"))->size(), (*tokens)->size()) << entry.path();
    }
    if (md.contains("tokenizer.ggml.token_type")) {
      EXPECT_EQ((*md.get_i32_array("tokenizer.ggml.token_type"))->size(), (*tokens)->size()) << entry.path();
    }
  }
  EXPECT_EQ(files, 12);
}

}  // namespace
}  // namespace qrt
