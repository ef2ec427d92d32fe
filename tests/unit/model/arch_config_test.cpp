// Architecture rules: config.json and GGUF metadata (through JsonMetadataView) into ModelConfig, with the
// values of real model configs, and errors that name the key.
#include <gtest/gtest.h>

#include <cmath>

#include "models/arch/arch.hpp"
#include "models/tensor_names.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

ModelConfig hf_ok(const std::string& text) {
  auto r = config_from_hf(json::parse(text));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : ModelConfig{};
}

Status hf_error(const std::string& text) { return config_from_hf(json::parse(text)).status(); }

TEST(ArchConfig, Llama31) {
  // Meta-Llama-3.1-8B-Instruct's config.json (abridged).
  ModelConfig c = hf_ok(R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "vocab_size": 128256})");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope.layout, RopeLayout::kHalfSplit);
  EXPECT_FLOAT_EQ(c.rope.theta, 500000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kLlama3);
  EXPECT_FLOAT_EQ(c.rope.factor, 8.0f);
  EXPECT_EQ(c.rope.original_context, 8192);
  EXPECT_FLOAT_EQ(c.rope.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope.rot_dim, 128);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.extra_eos_token_ids, (std::vector<int>{128008, 128009}));
  EXPECT_FALSE(c.tied_embeddings || c.attention_bias || c.mlp_bias || c.qk_norm);
  EXPECT_EQ(c.experts, 0);
}

TEST(ArchConfig, TinyLlamaMistralQwen) {
  ModelConfig t = hf_ok(R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
    "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4, "vocab_size": 32000,
    "rope_scaling": null, "max_position_embeddings": 2048})");
  EXPECT_EQ(t.kv_heads, 4);
  EXPECT_EQ(t.head_dim, 64);
  EXPECT_FLOAT_EQ(t.norm_eps, 1e-6f);  // LlamaConfig default when absent
  EXPECT_EQ(t.rope.scaling, RopeScaling::kNone);

  const std::string mistral_base = R"("model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000)";
  EXPECT_EQ(hf_ok("{" + mistral_base + R"(, "sliding_window": 4096})").sliding_window, 4096);
  EXPECT_EQ(hf_ok("{" + mistral_base + R"(, "sliding_window": null})").sliding_window, 0);
  EXPECT_EQ(hf_ok("{" + mistral_base + "}").sliding_window, 4096);  // MistralConfig's default

  ModelConfig q2 = hf_ok(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936,
    "rope_theta": 1000000.0, "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 32768,
    "max_window_layers": 21, "rms_norm_eps": 1e-06})");
  EXPECT_TRUE(q2.attention_bias);
  EXPECT_FALSE(q2.attention_out_bias);
  EXPECT_TRUE(q2.tied_embeddings);
  EXPECT_EQ(q2.sliding_window, 0);
  EXPECT_EQ(q2.head_dim, 64);
  EXPECT_EQ(hf_error(R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 24, "vocab_size": 10, "use_sliding_window": true, "max_window_layers": 21})").code(),
            ErrorCode::kUnsupported);

  ModelConfig q3 = hf_ok(R"({"model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728,
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "vocab_size": 151936,
    "head_dim": 128, "rope_theta": 1000000, "tie_word_embeddings": true})");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 128);  // not hidden / heads = 80
  EXPECT_EQ(q3.rope.rot_dim, 128);
  EXPECT_FALSE(q3.attention_bias);
}

TEST(ArchConfig, MixtralAndQwen3Moe) {
  ModelConfig m = hf_ok(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "num_local_experts": 8, "num_experts_per_tok": 2, "rope_theta": 1e6, "sliding_window": null})");
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.experts_used, 2);
  EXPECT_EQ(m.expert_ffn, 14336);
  EXPECT_TRUE(m.normalize_topk);
  EXPECT_FLOAT_EQ(m.norm_eps, 1e-5f);  // MixtralConfig default

  const std::string q = R"("model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
    "max_position_embeddings": 40960)";
  ModelConfig q3 = hf_ok("{" + q + R"(, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  EXPECT_EQ(q3.experts, 128);
  EXPECT_EQ(q3.experts_used, 8);
  EXPECT_EQ(q3.expert_ffn, 768);
  EXPECT_TRUE(q3.normalize_topk);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(q3.rope.original_context, 32768);
  EXPECT_NEAR(q3.rope.attn_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_FALSE(hf_ok("{" + q + "}").normalize_topk);  // Qwen3MoeConfig's default
  EXPECT_EQ(hf_error("{" + q + R"(, "mlp_only_layers": [3]})").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(hf_error("{" + q + R"(, "decoder_sparse_step": 2})").code(), ErrorCode::kUnsupported);
}

TEST(ArchConfig, RopeParametersAndErrors) {
  const std::string base = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100)";
  // transformers 5.x writes rope_parameters instead of rope_theta / rope_scaling.
  ModelConfig v5 = hf_ok("{" + base + R"(, "rope_parameters": {"rope_type": "linear", "factor": 2.0,
    "rope_theta": 50000.0}})");
  EXPECT_EQ(v5.rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(v5.rope.theta, 50000.0f);
  EXPECT_EQ(hf_ok("{" + base + R"(, "partial_rotary_factor": 0.5})").rope.rot_dim, 8);

  Status s = hf_error(R"({"model_type": "gpt2"})");
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("qwen3_moe"), std::string::npos) << s.message();  // lists what is supported
  s = hf_error("{" + base + R"(, "hidden_size": "64"})");
  EXPECT_EQ(s.code(), ErrorCode::kFormatError);
  EXPECT_NE(s.message().find("hidden_size"), std::string::npos);
  s = hf_error(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
    "intermediate_size": 8})");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("vocab_size"), std::string::npos);
  EXPECT_EQ(hf_error("{" + base + R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0}})").code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(hf_error("{" + base + R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})").code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(hf_error("{" + base + R"(, "hidden_act": "gelu"})").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(hf_error("{" + base + R"(, "num_key_value_heads": 3})").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(hf_error("{" + base + R"(, "num_attention_heads": 0})").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(hf_error("[1, 2]").code(), ErrorCode::kFormatError);
}

TEST(ArchConfig, Gguf) {
  json llama = {{"general.architecture", "llama"},
                {"llama.block_count", 5},
                {"llama.embedding_length", 64},
                {"llama.feed_forward_length", 172},
                {"llama.context_length", 512},
                {"llama.attention.head_count", {8, 8, 8, 8, 8}},
                {"llama.attention.head_count_kv", 4},
                {"llama.attention.layer_norm_rms_epsilon", 1e-5},
                {"llama.rope.dimension_count", 8},
                {"tokenizer.ggml.tokens", json::array({"a", "b", "c"})},
                {"tokenizer.ggml.bos_token_id", 1}};
  auto r = config_from_gguf(JsonMetadataView(llama));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, "llama");
  EXPECT_EQ(r->rope.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(r->heads, 8);
  EXPECT_EQ(r->head_dim, 8);
  EXPECT_EQ(r->vocab_size, 3);
  EXPECT_FLOAT_EQ(r->rope.theta, 10000.0f);
  EXPECT_EQ(r->bos_token_id, 1);

  json uneven = llama;
  uneven["llama.attention.head_count"] = {8, 8, 4, 8, 8};
  EXPECT_EQ(config_from_gguf(JsonMetadataView(uneven)).status().code(), ErrorCode::kUnsupported);
  json no_eps = llama;
  no_eps.erase("llama.attention.layer_norm_rms_epsilon");
  auto e = config_from_gguf(JsonMetadataView(no_eps));
  EXPECT_EQ(e.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(e.status().message().find("layer_norm_rms_epsilon"), std::string::npos);
  json wrong_type = llama;
  wrong_type["llama.block_count"] = "five";
  EXPECT_EQ(config_from_gguf(JsonMetadataView(wrong_type)).status().code(), ErrorCode::kFormatError);
  json mamba = llama;
  mamba["general.architecture"] = "mamba";
  EXPECT_EQ(config_from_gguf(JsonMetadataView(mamba)).status().code(), ErrorCode::kUnsupported);

  json mixtral = llama;
  mixtral["llama.expert_count"] = 8;
  mixtral["llama.expert_used_count"] = 2;
  r = config_from_gguf(JsonMetadataView(mixtral));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->architecture, "mixtral");
  EXPECT_EQ(r->expert_ffn, 172);
  EXPECT_TRUE(r->normalize_topk);

  json q3moe = {{"general.architecture", "qwen3moe"},
                {"qwen3moe.block_count", 2},
                {"qwen3moe.embedding_length", 64},
                {"qwen3moe.feed_forward_length", 96},
                {"qwen3moe.attention.head_count", 4},
                {"qwen3moe.attention.head_count_kv", 2},
                {"qwen3moe.attention.key_length", 32},
                {"qwen3moe.attention.value_length", 32},
                {"qwen3moe.attention.layer_norm_rms_epsilon", 1e-6},
                {"qwen3moe.expert_count", 4},
                {"qwen3moe.expert_used_count", 2},
                {"qwen3moe.expert_feed_forward_length", 48},
                {"qwen3moe.rope.scaling.type", "yarn"},
                {"qwen3moe.rope.scaling.factor", 4.0},
                {"qwen3moe.rope.scaling.original_context_length", 32768},
                {"qwen3moe.vocab_size", 97}};
  r = config_from_gguf(JsonMetadataView(q3moe));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope.layout, RopeLayout::kHalfSplit);
  EXPECT_TRUE(r->qk_norm);
  EXPECT_EQ(r->head_dim, 32);
  EXPECT_EQ(r->expert_ffn, 48);
  EXPECT_EQ(r->rope.scaling, RopeScaling::kYarn);
  EXPECT_NEAR(r->rope.attn_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  q3moe["qwen3moe.attention.value_length"] = 16;
  EXPECT_EQ(config_from_gguf(JsonMetadataView(q3moe)).status().code(), ErrorCode::kUnsupported);
}

TEST(ArchConfig, TensorPresenceFlags) {
  TensorTable t;
  for (const char* n : {"token_embd", "blk.0.attn_q.bias", "blk.0.attn_q_norm", "blk.0.ffn_down.bias"}) t[n] = {};
  ModelConfig c;
  apply_tensor_presence(t, &c);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tied_embeddings);
  t["output"] = {};
  apply_tensor_presence(t, &c);
  EXPECT_FALSE(c.tied_embeddings);
}

}  // namespace
}  // namespace qrt::arch
