// DeepSeek-V2/V3: the published config.json files into ModelConfig (and the refusals naming what is unsupported),
// the grouped router of the CPU reference on hand-worked rows, the HF names of the new tensors, and the latent
// attention transformer's consistency (prompt vs KV-cache steps, batched and paged decoding, a cache of one latent
// row per token). Logits against an independent float64 forward are tests/oracle/model.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "decode_batch_check.hpp"
#include "kernels/cpu/ops.hpp"
#include "models/arch/arch.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "tiny_model.hpp"

namespace qrt {
namespace {

using nlohmann::json;

// deepseek-ai/DeepSeek-V2-Lite's config.json (auto_map and training-only keys left out).
json v2_lite() {
  return json::parse(R"({"architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false,
    "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "model_type": "deepseek_v2", "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1,
    "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": false, "num_attention_heads": 16,
    "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": null,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
      "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 1.0, "scoring_func": "softmax", "tie_word_embeddings": false, "topk_group": 1,
    "topk_method": "greedy", "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400})");
}

// deepseek-ai/DeepSeek-V3's config.json (quantization_config kept: the checkpoint is block FP8).
json v3() {
  return json::parse(R"({"architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "bos_token_id": 0,
    "eos_token_id": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
      "weight_block_size": [128, 128]}, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
      "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false, "topk_group": 4,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "vocab_size": 129280})");
}

double mscale(double scale, double m) { return 0.1 * m * std::log(scale) + 1.0; }

TEST(DeepseekConfig, V2LiteFromConfigJson) {
  auto r = arch::config_from_hf(v2_lite());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.architecture, "deepseek2");
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.qk_nope_dim, 128);
  EXPECT_EQ(c.qk_rope_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.head_dim, 192);
  EXPECT_EQ(c.rope.rot_dim, 64);
  EXPECT_EQ(c.rope.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope.original_context, 4096);
  EXPECT_NEAR(c.rope.attn_factor, 1.0, 1e-6);  // mscale == mscale_all_dim
  EXPECT_NEAR(c.attention_scale, std::pow(mscale(40, 0.707), 2) / std::sqrt(192.0), 1e-7);
  EXPECT_EQ(c.experts, 64);
  EXPECT_EQ(c.experts_used, 6);
  EXPECT_EQ(c.expert_ffn, 1408);
  EXPECT_EQ(c.shared_expert_ffn, 2 * 1408);
  EXPECT_EQ(c.leading_dense_layers, 1);
  EXPECT_EQ(c.ffn, 10944);
  EXPECT_FALSE(c.normalize_topk);
  EXPECT_FALSE(c.router_sigmoid);
  EXPECT_EQ(c.expert_groups, 1);
  EXPECT_FLOAT_EQ(c.routed_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.latent_norm_eps, 1e-6f);
  // One [RoPE key | latent] row of 576 per layer instead of 16 heads of 192 + 128: 27 x 576 x 2 bytes + a position.
  EXPECT_EQ(kv_cache_bytes_per_token(c, 1, KvType::kF16), 27u * 576 * 2 + 4);
  EXPECT_EQ(kv_cache_bytes_per_token(c, 4, KvType::kF16), 27u * 576 * 2 + 4);  // the latent on every rank
}

TEST(DeepseekConfig, V3FromConfigJson) {
  auto r = arch::config_from_hf(v3());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.architecture, "deepseek3");
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.experts, 256);
  EXPECT_EQ(c.experts_used, 8);
  EXPECT_EQ(c.leading_dense_layers, 3);
  EXPECT_EQ(c.shared_expert_ffn, 2048);
  EXPECT_TRUE(c.router_sigmoid && c.expert_choice_bias && c.group_score_top2 && c.normalize_topk);
  EXPECT_EQ(c.expert_groups, 8);
  EXPECT_EQ(c.expert_groups_used, 4);
  EXPECT_FLOAT_EQ(c.routed_scale, 2.5f);
  EXPECT_EQ(c.extra_layers, 1);  // the multi-token-prediction layer stored after the last
  EXPECT_NEAR(c.attention_scale, std::pow(mscale(40, 1.0), 2) / std::sqrt(192.0), 1e-7);

  // DeepSeek-V2's own code scales the weights only when it does not renormalize them.
  json v2_norm = v2_lite();
  v2_norm["norm_topk_prob"] = true;
  v2_norm["routed_scaling_factor"] = 16.0;
  EXPECT_FLOAT_EQ(arch::config_from_hf(v2_norm)->routed_scale, 1.0f);
  v2_norm["norm_topk_prob"] = false;
  EXPECT_FLOAT_EQ(arch::config_from_hf(v2_norm)->routed_scale, 16.0f);
}

// llama.cpp's deepseek2 keys: DeepSeek-V2-Lite as its current converter writes it (the absorbed form: one KV head
// of kv_lora + rope, the per-head sizes in the _mla keys) and V3 in the older expanded form.
TEST(DeepseekConfig, FromGguf) {
  json lite = {{"general.architecture", "deepseek2"}, {"deepseek2.block_count", 27},
               {"deepseek2.context_length", 163840}, {"deepseek2.embedding_length", 2048},
               {"deepseek2.feed_forward_length", 10944}, {"deepseek2.attention.head_count", 16},
               {"deepseek2.attention.head_count_kv", 1}, {"deepseek2.attention.key_length", 576},
               {"deepseek2.attention.value_length", 512}, {"deepseek2.attention.key_length_mla", 192},
               {"deepseek2.attention.value_length_mla", 128}, {"deepseek2.attention.layer_norm_rms_epsilon", 1e-6},
               {"deepseek2.attention.kv_lora_rank", 512}, {"deepseek2.rope.dimension_count", 64},
               {"deepseek2.rope.freq_base", 10000.0}, {"deepseek2.rope.scaling.type", "yarn"},
               {"deepseek2.rope.scaling.factor", 40.0}, {"deepseek2.rope.scaling.original_context_length", 4096},
               {"deepseek2.rope.scaling.yarn_log_multiplier", 0.0707}, {"deepseek2.leading_dense_block_count", 1},
               {"deepseek2.expert_count", 64}, {"deepseek2.expert_used_count", 6},
               {"deepseek2.expert_feed_forward_length", 1408}, {"deepseek2.expert_shared_count", 2},
               {"deepseek2.expert_weights_scale", 1.0}, {"deepseek2.vocab_size", 102400}};
  auto r = arch::config_from_gguf(arch::JsonMetadataView(lite));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, "deepseek2");
  EXPECT_EQ(r->head_dim, 192);
  EXPECT_EQ(r->qk_nope_dim, 128);
  EXPECT_EQ(r->v_head_dim, 128);
  EXPECT_EQ(r->kv_lora_rank, 512);
  EXPECT_EQ(r->q_lora_rank, 0);
  EXPECT_EQ(r->kv_heads, 16);
  EXPECT_EQ(r->rope.layout, RopeLayout::kInterleaved);
  EXPECT_FLOAT_EQ(r->rope.attn_factor, 1.0f);
  EXPECT_NEAR(r->attention_scale, std::pow(mscale(40, 0.707), 2) / std::sqrt(192.0), 1e-6);
  EXPECT_EQ(r->shared_expert_ffn, 2816);
  EXPECT_EQ(r->leading_dense_layers, 1);
  EXPECT_FALSE(r->router_sigmoid || r->normalize_topk);
  EXPECT_FLOAT_EQ(r->latent_norm_eps, 1e-6f);

  json v3_file = lite;
  v3_file["deepseek2.attention.key_length"] = 192;  // the expanded form
  v3_file["deepseek2.attention.value_length"] = 128;
  v3_file.erase("deepseek2.attention.key_length_mla");
  v3_file.erase("deepseek2.attention.value_length_mla");
  v3_file["deepseek2.attention.head_count_kv"] = 16;
  v3_file["deepseek2.attention.q_lora_rank"] = 1536;
  v3_file["deepseek2.expert_gating_func"] = 2;
  v3_file["deepseek2.expert_weights_norm"] = true;
  v3_file["deepseek2.expert_weights_scale"] = 2.5;
  v3_file["deepseek2.expert_group_count"] = 8;
  v3_file["deepseek2.expert_group_used_count"] = 4;
  r = arch::config_from_gguf(arch::JsonMetadataView(v3_file));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->head_dim, 192);
  EXPECT_EQ(r->q_lora_rank, 1536);
  EXPECT_TRUE(r->router_sigmoid && r->normalize_topk && r->group_score_top2);
  EXPECT_EQ(r->expert_groups, 8);
  EXPECT_EQ(r->expert_groups_used, 4);
  EXPECT_FLOAT_EQ(r->routed_scale, 2.5f);

  v3_file["deepseek2.expert_gating_func"] = 3;
  EXPECT_EQ(arch::config_from_gguf(arch::JsonMetadataView(v3_file)).status().code(), ErrorCode::kUnsupported);
  json bad = lite;
  bad["deepseek2.attention.key_length"] = 575;  // not kv_lora + rope
  EXPECT_EQ(arch::config_from_gguf(arch::JsonMetadataView(bad)).status().code(), ErrorCode::kInvalidArgument);
}

TEST(DeepseekConfig, RefusesWhatItCannotRunByName) {
  auto refused = [](json j, const char* key, const json& value, const char* named) {
    j[key] = value;
    auto r = arch::config_from_hf(j);
    EXPECT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().to_string();
  };
  refused(v2_lite(), "moe_layer_freq", 2, "moe_layer_freq 2");
  refused(v2_lite(), "scoring_func", "tanh", "scoring_func \"tanh\"");
  refused(v2_lite(), "topk_method", "random", "topk_method \"random\"");
  refused(v3(), "n_group", 3, "n_group 3");
  refused(v3(), "topk_group", 9, "topk_group 9");
  refused(v2_lite(), "qk_rope_head_dim", 63, "qk_rope_head_dim");
  refused(v2_lite(), "attention_bias", true, "attention_bias");
  refused(v2_lite(), "kv_lora_rank", 0, "kv_lora_rank");
  // What config.json leaves out takes the classes' defaults: V3's q latent of 1536, V2-Lite's null keeps none.
  json sparse = v3();
  for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
    sparse.erase(key);
  auto d = arch::config_from_hf(sparse);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->q_lora_rank, 1536);
  EXPECT_EQ(d->kv_lora_rank, 512);
  EXPECT_EQ(d->head_dim, 192);
  EXPECT_EQ(d->v_head_dim, 128);
}

TEST(DeepseekNames, HuggingFaceNamesBothWays) {
  const std::pair<const char*, const char*> pairs[] = {
      {"model.layers.3.self_attn.q_a_proj.weight", "blk.3.attn_q_a"},
      {"model.layers.3.self_attn.q_a_layernorm.weight", "blk.3.attn_q_a_norm"},
      {"model.layers.3.self_attn.q_b_proj.weight", "blk.3.attn_q_b"},
      {"model.layers.3.self_attn.kv_a_proj_with_mqa.weight", "blk.3.attn_kv_a_mqa"},
      {"model.layers.3.self_attn.kv_a_layernorm.weight", "blk.3.attn_kv_a_norm"},
      {"model.layers.3.self_attn.kv_b_proj.weight", "blk.3.attn_kv_b"},
      {"model.layers.3.mlp.shared_experts.gate_proj.weight", "blk.3.ffn_gate_shexp"},
      {"model.layers.3.mlp.shared_experts.up_proj.weight", "blk.3.ffn_up_shexp"},
      {"model.layers.3.mlp.shared_experts.down_proj.weight", "blk.3.ffn_down_shexp"},
      {"model.layers.3.mlp.gate.e_score_correction_bias", "blk.3.exp_probs_b.bias"},
  };
  for (auto [hf, canonical] : pairs) {
    auto c = names::canonical_from_hf(hf);
    ASSERT_TRUE(c.has_value()) << hf;
    EXPECT_EQ(c->name, canonical);
    EXPECT_EQ(names::hf_from_canonical(canonical, "deepseek2"), std::string(hf));
    EXPECT_TRUE(names::canonical_from_gguf(std::string(canonical) +
                                           (std::string(canonical).ends_with(".bias") ? "" : ".weight"))
                    .has_value())
        << canonical;
  }
}

// Hand-worked rows: 8 experts in 4 groups of 2.
TEST(DeepseekRouting, GroupsBiasScaleAndNormalization) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.9f, 2.8f, -1.0f, 2.0f, 1.0f, 0.5f};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  auto route = [&](const MoeRouting& r) { cpu::moe_route_grouped(logits.data(), 1, 8, 2, r, ids.data(), w.data()); };
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x));
  auto p = [&](int e) { return std::exp(double(logits[static_cast<size_t>(e)])) / sum; };

  route({});  // plain softmax top-2
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(w[0], p(1), 1e-7);
  MoeRouting one_group;  // V2: groups scored by their best: group 0 (3.0) beats group 1 (2.9)
  one_group.groups = 4;
  one_group.groups_used = 1;
  one_group.scale = 1.5f;
  route(one_group);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0}));  // only group 0's experts, the second of them despite its 0.0
  EXPECT_NEAR(w[1], 1.5 * p(0), 1e-7);
  MoeRouting top2 = one_group;  // V3's group score: the sum of the two best; group {2, 3} (5.7 in logits) wins
  top2.group_top2 = true;
  top2.sigmoid = true;
  top2.renormalize = true;
  top2.scale = 2.5f;
  route(top2);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3}));
  auto sig = [&](int e) { return 1.0 / (1.0 + std::exp(-double(logits[static_cast<size_t>(e)]))); };
  EXPECT_NEAR(w[0], 2.5 * sig(2) / (sig(2) + sig(3)), 1e-6);
  // A choice bias changes which experts win but not their weights.
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 0.9f, 0};
  MoeRouting biased;
  biased.sigmoid = true;
  biased.choice_bias = bias.data();
  route(biased);
  EXPECT_EQ(ids, (std::vector<int32_t>{6, 1}));
  EXPECT_NEAR(w[0], sig(6), 1e-7);
  EXPECT_NEAR(w[1], sig(1), 1e-7);
}

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 17 + 5) % vocab;
  return t;
}

ModelConfig tiny_deepseek(bool v3) {
  ModelConfig c = test::tiny_moe_config();
  c.qk_norm = false;
  c.experts = 8;
  test::set_deepseek(&c, v3);
  return c;
}

TEST(DeepseekTransformer, PromptEqualsStepsAndTheCacheHoldsOneLatentRow) {
  for (bool v3 : {false, true}) {
    test::TinyModel m = test::make_tiny_model(tiny_deepseek(v3));
    CpuBackend backend;
    auto model = Transformer::create(backend, m.config, m.tensors);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const ModelConfig& c = m.config;
    const auto tokens = some_tokens(9, c.vocab_size);
    auto all_seq = (*model)->new_sequence(16), step_seq = (*model)->new_sequence(16);
    ASSERT_TRUE(all_seq.ok() && step_seq.ok());
    std::vector<float> all, stepwise, logits;
    ASSERT_TRUE((*model)->forward(**all_seq, tokens, LogitsFor::kAll, &all).ok());
    ASSERT_TRUE((*model)->forward(**step_seq, std::span(tokens).first(4), LogitsFor::kAll, &stepwise).ok());
    for (size_t i = 4; i < tokens.size(); ++i) {
      ASSERT_TRUE((*model)->forward(**step_seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &logits).ok());
      stepwise.insert(stepwise.end(), logits.begin(), logits.end());
    }
    EXPECT_LT(test::batch_rel_diff(stepwise.data(), all.data(), all.size()), 1e-5) << "v3=" << v3;
    // Keys and values are one row of RoPE key and latent per layer and token; no value cache.
    const uint64_t row = static_cast<uint64_t>(c.qk_rope_dim + c.kv_lora_rank) * 4;
    EXPECT_EQ((*all_seq)->kv_cache_bytes(), 16 * (c.layers * row + 4));
    EXPECT_EQ((*all_seq)->kv_cache_bytes(), 16 * kv_cache_bytes_per_token(c, 1, KvType::kF32));
    // Several sequences decoding together, with their own caches and paged in one pool.
    for (int rows : {1, 3}) EXPECT_LT(test::check_decode_batch(**model, rows, 3), 1e-5) << "v3=" << v3;
    auto pool = (*model)->new_kv_pool(64, 4);
    ASSERT_TRUE(pool.ok());
    EXPECT_LT(test::check_decode_batch(**model, 3, 3, pool->get()), 1e-5) << "v3=" << v3;
  }
}

TEST(DeepseekTransformer, ExtraLayersAreSkippedAndMissingTensorsNamed) {
  ModelConfig c = tiny_deepseek(true);
  c.layers = 3;
  test::TinyModel m = test::make_tiny_model(c);
  c.layers = 2;  // layer 2 plays V3's multi-token-prediction layer, stored after the last
  m.config = c;
  CpuBackend backend;
  auto refused = Transformer::create(backend, c, m.tensors);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("blk.2."), std::string::npos) << refused.status().to_string();
  c.extra_layers = 1;
  auto model = Transformer::create(backend, c, m.tensors);
  EXPECT_TRUE(model.ok()) << model.status().to_string();

  m.tensors.erase("blk.1.attn_kv_b");
  auto missing = Transformer::create(backend, c, m.tensors);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("blk.1.attn_kv_b"), std::string::npos) << missing.status().to_string();
}

}  // namespace
}  // namespace qrt
