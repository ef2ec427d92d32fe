// Gemma 2 and Gemma 3 (text) configs into ModelConfig's feature flags: the published config.json of
// gemma-2-2b-it and gemma-3-1b-it, the "layer_types" form newer transformers write, the GGUF metadata llama.cpp's
// converter writes for both, and the refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "models/arch/arch.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

// google/gemma-2-2b-it config.json.
const char* kGemma2 = R"({"architectures": ["Gemma2ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
  "eos_token_id": [1, 107], "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
  "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
  "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
  "transformers_version": "4.42.4", "use_cache": true, "vocab_size": 256000})";

// google/gemma-3-1b-it config.json.
const char* kGemma3 = R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid",
  "eos_token_id": [1, 106], "final_logit_softcapping": null, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
  "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
  "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_scaling": null,
  "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})";

ModelConfig hf_ok(const json& j) {
  auto r = config_from_hf(j);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : ModelConfig{};
}

TEST(GemmaConfig, Gemma2FromConfigJson) {
  const ModelConfig c = hf_ok(json::parse(kGemma2));
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_EQ(c.hidden, 2304);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(2304.0f));
  EXPECT_FLOAT_EQ(c.norm_weight_offset, 1.0f);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.tied_embeddings);  // Gemma2Config's default: the file does not say
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_window_pattern, 2);  // layers 0, 2, ... windowed
  EXPECT_FLOAT_EQ(c.rope_local_theta, 0.0f);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.extra_eos_token_ids, std::vector<int>{107});

  // The 27B's query_pre_attn_scalar is hidden / heads = 144; no soft-capping when null.
  json big = json::parse(kGemma2);
  big["query_pre_attn_scalar"] = 144;
  big["final_logit_softcapping"] = nullptr;
  const ModelConfig b = hf_ok(big);
  EXPECT_FLOAT_EQ(b.attention_scale, 1.0f / 12.0f);
  EXPECT_FLOAT_EQ(b.final_softcap, 0.0f);
}

TEST(GemmaConfig, Gemma3FromConfigJson) {
  const ModelConfig c = hf_ok(json::parse(kGemma3));
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(1152.0f));
  EXPECT_FLOAT_EQ(c.attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 0.0f);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.sliding_window_pattern, 6);
  EXPECT_FLOAT_EQ(c.rope.theta, 1000000.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kNone);

  // The 4B and larger: linear scaling by 8 on the global layers.
  json scaled = json::parse(kGemma3);
  scaled["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  const ModelConfig s = hf_ok(scaled);
  EXPECT_EQ(s.rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(s.rope.factor, 8.0f);
}

TEST(GemmaConfig, LayerTypes) {
  json j = json::parse(kGemma3);
  j.erase("sliding_window_pattern");
  j["num_hidden_layers"] = 7;
  j["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                      "sliding_attention", "full_attention", "sliding_attention"};
  EXPECT_EQ(hf_ok(j).sliding_window_pattern, 3);
  j["layer_types"] = json::array();
  for (int l = 0; l < 7; ++l) j["layer_types"].push_back("sliding_attention");
  EXPECT_EQ(hf_ok(j).sliding_window_pattern, 0);  // every layer windowed
  EXPECT_EQ(hf_ok(j).sliding_window, 512);
  j["layer_types"][1] = "full_attention";
  j["layer_types"][4] = "full_attention";  // 1 and 4: not (l + 1) % 2 == 0
  auto r = config_from_hf(j);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("layer_types"), std::string::npos);
  j["layer_types"] = {"sliding_attention"};
  EXPECT_EQ(config_from_hf(j).status().code(), ErrorCode::kFormatError);  // one per layer
  j["layer_types"] = json::array();
  for (int l = 0; l < 7; ++l) j["layer_types"].push_back("chunked_attention");
  EXPECT_EQ(config_from_hf(j).status().code(), ErrorCode::kFormatError);
}

// google/gemma-3-4b-it's config.json (vision_config abridged): the text model under text_config, which leaves out
// what equals Gemma3TextConfig's defaults (heads, head_dim, vocabulary, norm eps, rope_theta).
TEST(GemmaConfig, Gemma3MultimodalTextModel) {
  const json j = json::parse(R"({"architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
      "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model", "num_hidden_layers": 27}})");
  const ModelConfig c = hf_ok(j);
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.hidden, 2560);
  EXPECT_EQ(c.ffn, 10240);
  EXPECT_EQ(c.layers, 34);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope.theta, 1000000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c.rope.factor, 8.0f);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.sliding_window_pattern, 6);
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.tied_embeddings);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.extra_eos_token_ids, std::vector<int>{106});  // the top level's, not the text default
  json no_text = j;
  no_text.erase("text_config");
  EXPECT_EQ(config_from_hf(no_text).status().code(), ErrorCode::kFormatError);
}

TEST(GemmaConfig, Refusals) {
  json erf = json::parse(kGemma2);
  erf["hidden_activation"] = "gelu";
  auto r = config_from_hf(erf);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("hidden_activation"), std::string::npos);
  json negative = json::parse(kGemma2);
  negative["attn_logit_softcapping"] = -1.0;
  EXPECT_EQ(config_from_hf(negative).status().code(), ErrorCode::kInvalidArgument);
  json zero_scalar = json::parse(kGemma2);
  zero_scalar["query_pre_attn_scalar"] = 0;
  EXPECT_EQ(config_from_hf(zero_scalar).status().code(), ErrorCode::kInvalidArgument);
}

// The keys llama.cpp's convert_hf_to_gguf writes for gemma-2-2b and gemma-3-1b.
TEST(GemmaConfig, FromGguf) {
  json g2 = {{"general.architecture", "gemma2"},
             {"gemma2.context_length", 8192},
             {"gemma2.embedding_length", 2304},
             {"gemma2.block_count", 26},
             {"gemma2.feed_forward_length", 9216},
             {"gemma2.attention.head_count", 8},
             {"gemma2.attention.head_count_kv", 4},
             {"gemma2.attention.layer_norm_rms_epsilon", 1e-6},
             {"gemma2.attention.key_length", 256},
             {"gemma2.attention.value_length", 256},
             {"gemma2.attention.sliding_window", 4096},
             {"gemma2.attn_logit_softcapping", 50.0},
             {"gemma2.final_logit_softcapping", 30.0},
             {"gemma2.vocab_size", 256000}};
  auto r = config_from_gguf(JsonMetadataView(g2));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, "gemma2");
  EXPECT_FLOAT_EQ(r->norm_weight_offset, 0.0f);  // the converter stored 1 + w
  EXPECT_TRUE(r->post_norms);
  EXPECT_EQ(r->activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(r->embedding_scale, std::sqrt(2304.0f));
  EXPECT_FLOAT_EQ(r->attention_scale, 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(r->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(r->final_softcap, 30.0f);
  EXPECT_EQ(r->sliding_window, 4096);
  EXPECT_EQ(r->sliding_window_pattern, 2);
  EXPECT_EQ(r->rope.layout, RopeLayout::kHalfSplit);

  // 46 layers: the 27B, scaled by hidden / heads as llama.cpp does (4608 / 32 = 144).
  json g27 = g2;
  g27["gemma2.block_count"] = 46;
  g27["gemma2.embedding_length"] = 4608;
  g27["gemma2.attention.head_count"] = 32;
  g27["gemma2.attention.head_count_kv"] = 16;
  g27["gemma2.attention.key_length"] = 128;
  g27["gemma2.attention.value_length"] = 128;
  r = config_from_gguf(JsonMetadataView(g27));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ(r->attention_scale, 1.0f / 12.0f);

  json g3 = {{"general.architecture", "gemma3"},
             {"gemma3.context_length", 32768},
             {"gemma3.embedding_length", 1152},
             {"gemma3.block_count", 26},
             {"gemma3.feed_forward_length", 6912},
             {"gemma3.attention.head_count", 4},
             {"gemma3.attention.head_count_kv", 1},
             {"gemma3.attention.layer_norm_rms_epsilon", 1e-6},
             {"gemma3.attention.key_length", 256},
             {"gemma3.attention.value_length", 256},
             {"gemma3.attention.sliding_window", 512},
             {"gemma3.rope.freq_base", 1000000.0},
             {"gemma3.vocab_size", 262144}};
  r = config_from_gguf(JsonMetadataView(g3));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, "gemma3");
  EXPECT_EQ(r->sliding_window_pattern, 6);
  EXPECT_FLOAT_EQ(r->rope_local_theta, 10000.0f);
  EXPECT_FLOAT_EQ(r->rope.theta, 1000000.0f);
  EXPECT_FLOAT_EQ(r->attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(r->final_softcap, 0.0f);
  g3["gemma3.attention.sliding_window_pattern"] = 4;
  EXPECT_EQ(config_from_gguf(JsonMetadataView(g3))->sliding_window_pattern, 4);
}

}  // namespace
}  // namespace qrt::arch
