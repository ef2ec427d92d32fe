// gpt-oss: the published config.json of gpt-oss-20b into ModelConfig, llama.cpp's GGUF keys, and the Hugging Face
// expert parameters (gate and up interleaved, dense ones stored [experts, in, out]) into the canonical stacks, with
// the errors that name what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/arch/arch.hpp"
#include "models/gpt_oss_experts.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

// openai/gpt-oss-20b config.json (layer_types shortened to its 24 entries' pattern).
json gpt_oss_20b() {
  json j = json::parse(R"({"architectures": ["GptOssForCausalLM"], "attention_bias": true,
    "attention_dropout": 0.0, "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32,
    "output_router_logits": false, "pad_token_id": 199999, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
      "rope_type": "yarn", "truncate": false}, "rope_theta": 150000, "router_aux_loss_coef": 0.9,
    "sliding_window": 128, "swiglu_limit": 7.0, "tie_word_embeddings": false, "use_cache": true,
    "vocab_size": 201088})");
  j["layer_types"] = json::array();
  for (int l = 0; l < 24; ++l) j["layer_types"].push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  return j;
}

TEST(GptOssConfig, FromConfigJson) {
  auto r = config_from_hf(gpt_oss_20b());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.architecture, "gpt-oss");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.experts, 32);
  EXPECT_EQ(c.experts_used, 4);
  EXPECT_EQ(c.expert_ffn, 2880);
  EXPECT_TRUE(c.normalize_topk);  // softmax over the top-k logits
  EXPECT_TRUE(c.attention_bias && c.attention_out_bias && c.attention_sinks && c.router_bias && c.expert_bias);
  EXPECT_EQ(c.activation, Activation::kSwigluClamped);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 7.0f);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.sliding_window_pattern, 2);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kYarn);
  EXPECT_FALSE(c.rope.yarn_truncate);
  EXPECT_FLOAT_EQ(c.rope.factor, 32.0f);
  EXPECT_EQ(c.rope.original_context, 4096);
  EXPECT_FLOAT_EQ(c.rope.theta, 150000.0f);
  EXPECT_NEAR(c.rope.attn_factor, 0.1 * std::log(32.0) + 1.0, 1e-6);
  EXPECT_FALSE(c.tied_embeddings);

  json no_bias = gpt_oss_20b();
  no_bias["attention_bias"] = false;
  EXPECT_EQ(config_from_hf(no_bias).status().code(), ErrorCode::kUnsupported);
  json bad_limit = gpt_oss_20b();
  bad_limit["swiglu_limit"] = 0.0;
  EXPECT_EQ(config_from_hf(bad_limit).status().code(), ErrorCode::kInvalidArgument);
}

TEST(GptOssConfig, FromGguf) {
  const json md = {{"general.architecture", "gpt-oss"},
                   {"gpt-oss.block_count", 24},
                   {"gpt-oss.context_length", 131072},
                   {"gpt-oss.embedding_length", 2880},
                   {"gpt-oss.feed_forward_length", 2880},
                   {"gpt-oss.attention.head_count", 64},
                   {"gpt-oss.attention.head_count_kv", 8},
                   {"gpt-oss.attention.key_length", 64},
                   {"gpt-oss.attention.value_length", 64},
                   {"gpt-oss.attention.layer_norm_rms_epsilon", 1e-5},
                   {"gpt-oss.attention.sliding_window", 128},
                   {"gpt-oss.expert_count", 32},
                   {"gpt-oss.expert_used_count", 4},
                   {"gpt-oss.expert_feed_forward_length", 2880},
                   {"gpt-oss.rope.freq_base", 150000.0},
                   {"gpt-oss.rope.scaling.type", "yarn"},
                   {"gpt-oss.rope.scaling.factor", 32.0},
                   {"gpt-oss.rope.scaling.original_context_length", 4096},
                   {"gpt-oss.vocab_size", 201088}};
  auto r = config_from_gguf(JsonMetadataView(md));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, "gpt-oss");
  EXPECT_EQ(r->expert_ffn, 2880);
  EXPECT_TRUE(r->attention_sinks && r->router_bias && r->expert_bias);
  EXPECT_EQ(r->activation, Activation::kSwigluClamped);
  EXPECT_EQ(r->sliding_window_pattern, 2);
  EXPECT_TRUE(r->rope.yarn_truncate);  // llama.cpp's only behaviour
  EXPECT_EQ(r->rope.layout, RopeLayout::kHalfSplit);
}

// A dense layer: gate_up [2 experts, in 3, out 2 * 2] with value = 1000 e + 10 i + o, so every output lands where
// its indices say.
TEST(GptOssConfig, ExpertsIntoCanonicalStacks) {
  std::vector<std::vector<float>> store;
  TensorTable src;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, auto value) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    store.emplace_back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) store.back()[static_cast<size_t>(i)] = value(i);
    QuantTensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.data = {reinterpret_cast<const uint8_t*>(store.back().data()), store.back().size() * 4};
    src[name] = t;
  };
  store.reserve(8);
  const std::string p = "model.layers.3.mlp.experts.";
  add(p + "gate_up_proj", {2, 3, 4}, [](int64_t i) { return float(1000 * (i / 12) + 10 * (i / 4 % 3) + i % 4); });
  add(p + "gate_up_proj_bias", {2, 4}, [](int64_t i) { return float(i); });
  add(p + "down_proj", {2, 2, 3}, [](int64_t i) { return float(1000 * (i / 6) + 10 * (i / 3 % 2) + i % 3); });
  add(p + "down_proj_bias", {2, 3}, [](int64_t i) { return float(-i); });
  add("model.layers.3.self_attn.sinks", {4}, [](int64_t i) { return float(i); });
  auto r = names::canonicalize(src, names::NameScheme::kHuggingFace);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto values = [&](const std::string& name) {
    const QuantTensor& t = r->tensors.at(name);
    std::vector<float> v(t.data.size / 4);
    std::memcpy(v.data(), t.data.data, t.data.size);
    return std::make_pair(t.shape, v);
  };
  // gate[e, f, i] = gate_up[e, i, 2 f]; up the odd outputs; down transposed to [experts, out, in].
  EXPECT_EQ(values("blk.3.ffn_gate_exps"), std::make_pair(std::vector<int64_t>{2, 2, 3},
                                                          std::vector<float>{0, 10, 20, 2, 12, 22, 1000, 1010, 1020,
                                                                             1002, 1012, 1022}));
  EXPECT_EQ(values("blk.3.ffn_up_exps").second,
            (std::vector<float>{1, 11, 21, 3, 13, 23, 1001, 1011, 1021, 1003, 1013, 1023}));
  EXPECT_EQ(values("blk.3.ffn_down_exps"), std::make_pair(std::vector<int64_t>{2, 3, 2},
                                                          std::vector<float>{0, 10, 1, 11, 2, 12, 1000, 1010, 1001,
                                                                             1011, 1002, 1012}));
  EXPECT_EQ(values("blk.3.ffn_gate_exps.bias").second, (std::vector<float>{0, 2, 4, 6}));
  EXPECT_EQ(values("blk.3.ffn_up_exps.bias").second, (std::vector<float>{1, 3, 5, 7}));
  EXPECT_EQ(values("blk.3.ffn_down_exps.bias").second, (std::vector<float>{0, -1, -2, -3, -4, -5}));
  EXPECT_TRUE(r->tensors.count("blk.3.attn_sinks"));

  TensorTable missing = src;
  missing.erase(p + "down_proj_bias");
  auto e = names::canonicalize(missing, names::NameScheme::kHuggingFace);
  EXPECT_EQ(e.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(e.status().message().find("down_proj_bias"), std::string::npos);
  TensorTable wrong = src;
  wrong[p + "down_proj"].shape = {2, 3, 2};  // [experts, out, in]: not the dense layout
  e = names::canonicalize(wrong, names::NameScheme::kHuggingFace);
  EXPECT_EQ(e.status().code(), ErrorCode::kFormatError);
  EXPECT_NE(e.status().message().find("down_proj"), std::string::npos);
}

}  // namespace
}  // namespace qrt::arch
