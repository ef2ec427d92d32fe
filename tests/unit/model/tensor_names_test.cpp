// Canonical tensor names: the Hugging Face and GGUF maps, and stacking per-expert tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "models/tensor_names.hpp"

namespace qrt::names {
namespace {

TEST(TensorNames, HuggingFaceMap) {
  struct Case {
    const char* hf;
    const char* canonical;
    int expert;
  };
  const Case cases[] = {
      {"model.embed_tokens.weight", "token_embd", -1},
      {"model.norm.weight", "output_norm", -1},
      {"lm_head.weight", "output", -1},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm", -1},
      {"model.layers.11.post_attention_layernorm.weight", "blk.11.ffn_norm", -1},
      {"model.layers.3.self_attn.q_proj.weight", "blk.3.attn_q", -1},
      {"model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias", -1},
      {"model.layers.3.self_attn.k_proj.weight", "blk.3.attn_k", -1},
      {"model.layers.3.self_attn.v_proj.bias", "blk.3.attn_v.bias", -1},
      {"model.layers.3.self_attn.o_proj.weight", "blk.3.attn_output", -1},
      {"model.layers.3.self_attn.q_norm.weight", "blk.3.attn_q_norm", -1},
      {"model.layers.3.self_attn.k_norm.weight", "blk.3.attn_k_norm", -1},
      {"model.layers.3.mlp.gate_proj.weight", "blk.3.ffn_gate", -1},
      {"model.layers.3.mlp.up_proj.weight", "blk.3.ffn_up", -1},
      {"model.layers.3.mlp.down_proj.bias", "blk.3.ffn_down.bias", -1},
      {"model.layers.3.mlp.gate.weight", "blk.3.ffn_gate_inp", -1},
      {"model.layers.3.block_sparse_moe.gate.weight", "blk.3.ffn_gate_inp", -1},
      {"model.layers.3.mlp.experts.17.gate_proj.weight", "blk.3.ffn_gate_exps", 17},
      {"model.layers.3.mlp.experts.0.up_proj.weight", "blk.3.ffn_up_exps", 0},
      {"model.layers.3.mlp.experts.127.down_proj.weight", "blk.3.ffn_down_exps", 127},
      {"model.layers.1.block_sparse_moe.experts.7.w1.weight", "blk.1.ffn_gate_exps", 7},
      {"model.layers.1.block_sparse_moe.experts.7.w3.weight", "blk.1.ffn_up_exps", 7},
      {"model.layers.1.block_sparse_moe.experts.7.w2.weight", "blk.1.ffn_down_exps", 7},
      // Stacked experts of UQFF exports (mistral.rs names them gate/up/down_proj for every MoE model).
      {"model.layers.0.mlp.experts.gate_proj.weight", "blk.0.ffn_gate_exps", -1},
      {"model.layers.2.mlp.experts.down_proj.bias", "blk.2.ffn_down_exps.bias", -1},
      {"model.layers.1.block_sparse_moe.experts.up_proj.weight", "blk.1.ffn_up_exps", -1},
  };
  for (const Case& c : cases) {
    auto got = canonical_from_hf(c.hf);
    ASSERT_TRUE(got.has_value()) << c.hf;
    EXPECT_EQ(*got, (CanonicalName{c.canonical, c.expert})) << c.hf;
  }
  for (const char* ignored : {"model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.x.mlp.up_proj.weight",
                              "model.layers.01.mlp.up_proj.weight", "model.layers.0.mlp.up_proj", "lm_head.scales",
                              "model.layers.0.mlp.experts.w1.weight", "model.layers.99999999.mlp.up_proj.weight",
                              "", "blk.0.attn_q.weight"})
    EXPECT_FALSE(canonical_from_hf(ignored).has_value()) << ignored;
}

// hf_from_canonical inverts canonical_from_hf: every whole-tensor HF name comes back from its canonical name (Mixtral's
// module names when asked), experts as mistral.rs' stacked keys.
TEST(TensorNames, HfNamesFromCanonicalInvertTheMap) {
  const std::pair<const char*, const char*> names[] = {
      {"model.embed_tokens.weight", "llama"}, {"model.norm.weight", "llama"}, {"lm_head.weight", "llama"},
      {"model.layers.0.input_layernorm.weight", "llama"}, {"model.layers.11.post_attention_layernorm.weight", "llama"},
      {"model.layers.3.self_attn.q_proj.weight", "llama"}, {"model.layers.3.self_attn.q_proj.bias", "llama"},
      {"model.layers.3.self_attn.k_norm.weight", "qwen3"}, {"model.layers.3.mlp.down_proj.bias", "llama"},
      {"model.layers.3.mlp.gate.weight", "qwen3moe"}, {"model.layers.3.block_sparse_moe.gate.weight", "mixtral"},
      {"model.layers.0.mlp.experts.gate_proj.weight", "qwen3moe"},
      {"model.layers.1.block_sparse_moe.experts.up_proj.weight", "mixtral"},
      // gpt-oss: its router's name, the sink logits without a suffix, stacked experts with their biases.
      {"model.layers.3.mlp.router.weight", "gpt-oss"}, {"model.layers.3.mlp.router.bias", "gpt-oss"},
      {"model.layers.3.self_attn.sinks", "gpt-oss"}, {"model.layers.2.mlp.experts.down_proj.bias", "gpt-oss"},
  };
  for (const auto& [hf, arch] : names) {
    auto c = canonical_from_hf(hf);
    ASSERT_TRUE(c.has_value()) << hf;
    EXPECT_EQ(hf_from_canonical(c->name, arch), std::optional<std::string>(hf)) << c->name;
  }
  EXPECT_FALSE(hf_from_canonical("blk.0.nonsense", "llama").has_value());
  EXPECT_FALSE(hf_from_canonical("rope_freqs", "llama").has_value());
  // Sinks are gpt-oss's alone, and never a bias.
  EXPECT_FALSE(hf_from_canonical("blk.0.attn_sinks", "llama").has_value());
  EXPECT_FALSE(hf_from_canonical("blk.0.attn_sinks.bias", "gpt-oss").has_value());
}

// Gemma's four norms per layer: post_attention_layernorm is the attention output's post-norm when the checkpoint has
// a pre_feedforward_layernorm (canonicalize decides from the names), llama's MLP input norm otherwise; the inverse
// map gives the same names back.
TEST(TensorNames, GemmaSandwichNorms) {
  const std::pair<const char*, const char*> gemma[] = {
      {"model.layers.2.input_layernorm.weight", "blk.2.attn_norm"},
      {"model.layers.2.post_attention_layernorm.weight", "blk.2.post_attention_norm"},
      {"model.layers.2.pre_feedforward_layernorm.weight", "blk.2.ffn_norm"},
      {"model.layers.2.post_feedforward_layernorm.weight", "blk.2.post_ffw_norm"},
  };
  for (const auto& [hf, canonical] : gemma) {
    auto c = canonical_from_hf(hf, true);
    ASSERT_TRUE(c.has_value()) << hf;
    EXPECT_EQ(c->name, canonical) << hf;
    EXPECT_EQ(hf_from_canonical(c->name, "gemma2", true), std::optional<std::string>(hf)) << c->name;
    EXPECT_EQ(*canonical_from_gguf(std::string(canonical) + ".weight"), (CanonicalName{canonical, -1}));
  }
  EXPECT_EQ(canonical_from_hf("model.layers.2.post_attention_layernorm.weight")->name, "blk.2.ffn_norm");
  // Gemma 3's multimodal checkpoints: the text model under language_model. (older) or model.language_model.
  EXPECT_EQ(canonical_from_hf("language_model.model.layers.2.pre_feedforward_layernorm.weight", true)->name,
            "blk.2.ffn_norm");
  EXPECT_EQ(canonical_from_hf("model.language_model.layers.2.self_attn.q_norm.weight")->name, "blk.2.attn_q_norm");
  EXPECT_EQ(canonical_from_hf("model.language_model.embed_tokens.weight")->name, "token_embd");
  EXPECT_EQ(canonical_from_hf("language_model.lm_head.weight")->name, "output");
  EXPECT_FALSE(canonical_from_hf("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight").has_value());
  EXPECT_FALSE(canonical_from_hf("model.multi_modal_projector.mm_input_projection_weight").has_value());

  std::vector<std::vector<uint8_t>> store;
  auto norm = [&](const std::string& name) {
    store.emplace_back(16, 0);
    QuantTensor t;
    t.name = name;
    t.shape = {4};
    t.data = {store.back().data(), 16};
    return t;
  };
  store.reserve(4);
  TensorTable llama, sandwich;
  for (const char* n : {"model.layers.0.post_attention_layernorm.weight"}) llama[n] = norm(n);
  for (const auto& [hf, canonical] : gemma) sandwich[hf] = norm(hf);
  EXPECT_FALSE(has_sandwich_norms(llama));
  EXPECT_TRUE(has_sandwich_norms(sandwich));
  auto r = canonicalize(llama, NameScheme::kHuggingFace);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->tensors.count("blk.0.ffn_norm"));
  r = canonicalize(sandwich, NameScheme::kHuggingFace);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (const auto& [hf, canonical] : gemma) EXPECT_EQ(r->tensors.at(canonical).name, hf);
}

// gpt-oss's names: the sinks without a suffix, the router (with its bias) as ffn_gate_inp.
TEST(TensorNames, GptOssNames) {
  EXPECT_EQ(*canonical_from_hf("model.layers.7.self_attn.sinks"), (CanonicalName{"blk.7.attn_sinks", -1}));
  EXPECT_EQ(*canonical_from_hf("model.layers.7.mlp.router.weight"), (CanonicalName{"blk.7.ffn_gate_inp", -1}));
  EXPECT_EQ(*canonical_from_hf("model.layers.7.mlp.router.bias"), (CanonicalName{"blk.7.ffn_gate_inp.bias", -1}));
  EXPECT_FALSE(canonical_from_hf("model.layers.7.self_attn.sinks.weight").has_value());
  EXPECT_FALSE(canonical_from_hf("model.layers.x.self_attn.sinks").has_value());
}

TEST(TensorNames, GgufMap) {
  EXPECT_EQ(*canonical_from_gguf("token_embd.weight"), (CanonicalName{"token_embd", -1}));
  EXPECT_EQ(*canonical_from_gguf("output.weight"), (CanonicalName{"output", -1}));
  EXPECT_EQ(*canonical_from_gguf("output_norm.weight"), (CanonicalName{"output_norm", -1}));
  EXPECT_EQ(*canonical_from_gguf("rope_freqs.weight"), (CanonicalName{"rope_freqs", -1}));
  EXPECT_EQ(*canonical_from_gguf("blk.4.attn_q.bias"), (CanonicalName{"blk.4.attn_q.bias", -1}));
  EXPECT_EQ(*canonical_from_gguf("blk.4.ffn_gate_exps.weight"), (CanonicalName{"blk.4.ffn_gate_exps", -1}));
  EXPECT_EQ(*canonical_from_gguf("blk.4.ffn_gate_inp.weight"), (CanonicalName{"blk.4.ffn_gate_inp", -1}));
  EXPECT_EQ(*canonical_from_gguf("blk.4.ffn_down.3.weight"), (CanonicalName{"blk.4.ffn_down_exps", 3}));
  EXPECT_EQ(layer_tensor(12, LayerTensor::kAttnKNorm), "blk.12.attn_k_norm");
  EXPECT_EQ(*canonical_from_gguf("blk.4.attn_sinks.weight"), (CanonicalName{"blk.4.attn_sinks", -1}));  // gpt-oss
  for (const char* ignored : {"blk.4.attn_nonsense.weight", "blk.4.attn_q", "token_embd.scale", "blk.ffn_up.weight",
                              "blk.4.ffn_gate.x.weight", "model.embed_tokens.weight"})
    EXPECT_FALSE(canonical_from_gguf(ignored).has_value()) << ignored;
}

struct Bytes {
  std::vector<std::vector<uint8_t>> store;
  QuantTensor make(const std::string& name, std::vector<int64_t> shape, uint8_t fill, size_t n) {
    store.emplace_back(n, fill);
    QuantTensor t;
    t.name = name;
    t.format = quant::FormatId::kQ8_0;
    t.shape = std::move(shape);
    t.data = {store.back().data(), n};
    return t;
  }
};

TEST(TensorNames, CanonicalizeStacksExperts) {
  Bytes b;
  b.store.reserve(16);
  TensorTable src;
  for (int e = 0; e < 3; ++e) {
    const std::string n = "model.layers.0.mlp.experts." + std::to_string(e) + ".up_proj.weight";
    src[n] = b.make(n, {2, 32}, static_cast<uint8_t>(10 + e), 68);
  }
  src["model.layers.0.self_attn.rotary_emb.inv_freq"] = b.make("inv", {4}, 0, 4);
  src["model.embed_tokens.weight"] = b.make("model.embed_tokens.weight", {5, 32}, 1, 170);
  auto r = canonicalize(src, NameScheme::kHuggingFace);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 2u);
  ASSERT_EQ(r->ignored, std::vector<std::string>{"model.layers.0.self_attn.rotary_emb.inv_freq"});
  const QuantTensor& s = r->tensors.at("blk.0.ffn_up_exps");
  EXPECT_EQ(s.shape, (std::vector<int64_t>{3, 2, 32}));
  EXPECT_EQ(s.format, quant::FormatId::kQ8_0);
  ASSERT_EQ(s.data.size, 3u * 68);
  for (int e = 0; e < 3; ++e)
    for (int i = 0; i < 68; ++i) ASSERT_EQ(s.data.data[e * 68 + i], 10 + e);
  EXPECT_EQ(r->tensors.at("token_embd").data.data, src["model.embed_tokens.weight"].data.data);  // not copied
}

TEST(TensorNames, CanonicalizeErrors) {
  Bytes b;
  b.store.reserve(16);
  {
    TensorTable src;  // expert 1 missing
    for (int e : {0, 2}) {
      const std::string n = "model.layers.0.mlp.experts." + std::to_string(e) + ".up_proj.weight";
      src[n] = b.make(n, {2, 32}, 0, 68);
    }
    auto r = canonicalize(src, NameScheme::kHuggingFace);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("blk.0.ffn_up_exps"), std::string::npos) << r.status().message();
  }
  {
    TensorTable src;  // shapes differ
    src["model.layers.0.mlp.experts.0.up_proj.weight"] = b.make("a", {2, 32}, 0, 68);
    src["model.layers.0.mlp.experts.1.up_proj.weight"] = b.make("b", {1, 64}, 0, 68);
    EXPECT_FALSE(canonicalize(src, NameScheme::kHuggingFace).ok());
  }
  {
    TensorTable src;  // both stacked and per-expert
    src["blk.0.ffn_up_exps.weight"] = b.make("s", {1, 2, 32}, 0, 68);
    src["blk.0.ffn_up.0.weight"] = b.make("e", {2, 32}, 0, 68);
    EXPECT_FALSE(canonicalize(src, NameScheme::kGguf).ok());
  }
}

}  // namespace
}  // namespace qrt::names
