// Random tiny models in canonical form for the transformer and backend tests: F32 (or requantized) weights
// owned by the returned object.
#pragma once

#include <cmath>
#include <cstring>
#include <list>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "loader/quant_tensor.hpp"
#include "models/model_config.hpp"
#include "models/tensor_names.hpp"
#include "test_support.hpp"

namespace qrt::test {

struct TinyModel {
  ModelConfig config;
  TensorTable tensors;
  std::list<std::vector<uint8_t>> storage;  // stable addresses for the spans

  // Adds `name` with `shape`, random values of the given scale (plus `offset`), as F32.
  void add(const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = random_normal(static_cast<size_t>(n), seed_++, scale);
    for (float& x : v) x += offset;
    std::vector<uint8_t>& bytes = storage.emplace_back(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    QuantTensor t;
    t.name = name;
    t.format = quant::FormatId::kF32;
    t.shape = std::move(shape);
    t.data = {bytes.data(), bytes.size()};
    tensors[name] = t;
  }

 private:
  uint64_t seed_ = 77;
};

// Phi-3's layout: each layer's q, k, v (and their biases) fused into attn_qkv, gate and up into ffn_gate_up; F32
// rows concatenated in that order (models/fused_tensors.hpp splits them back).
inline void fuse_projections(TinyModel& m) {
  using names::LayerTensor;
  auto fuse = [&](const std::vector<std::string>& parts, const std::string& fused) {
    if (!m.tensors.count(parts[0])) return;
    std::vector<uint8_t>& bytes = m.storage.emplace_back();
    std::vector<int64_t> shape = m.tensors[parts[0]].shape;
    shape[0] = 0;
    for (const std::string& p : parts) {
      const QuantTensor& t = m.tensors[p];
      bytes.insert(bytes.end(), t.data.data, t.data.data + t.data.size);
      shape[0] += t.shape[0];
    }
    QuantTensor t = m.tensors[parts[0]];
    t.name = fused;
    t.shape = shape;
    t.data = {bytes.data(), bytes.size()};
    for (const std::string& p : parts) m.tensors.erase(p);
    m.tensors[fused] = t;
  };
  for (int l = 0; l < m.config.layers; ++l) {
    auto n = [&](LayerTensor t) { return names::layer_tensor(l, t); };
    for (bool bias : {false, true}) {
      auto named = [&](LayerTensor t) { return bias ? names::bias_of(n(t)) : n(t); };
      fuse({named(LayerTensor::kAttnQ), named(LayerTensor::kAttnK), named(LayerTensor::kAttnV)},
           named(LayerTensor::kAttnQkv));
      fuse({named(LayerTensor::kFfnGate), named(LayerTensor::kFfnUp)}, named(LayerTensor::kFfnGateUp));
    }
  }
}

// A llama-like model (set experts/qk_norm/biases in `c` first); every tensor the config asks for. A "phi3" config
// gets fused projections.
inline TinyModel make_tiny_model(ModelConfig c) {
  using names::LayerTensor;
  TinyModel m;
  if (c.head_dim == 0) c.head_dim = c.hidden / c.heads;
  m.config = c;
  const int64_t h = c.hidden, q = int64_t{c.heads} * c.head_dim, kv = int64_t{c.kv_heads} * c.head_dim;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    m.add(name, {rows, cols}, 1.0f / std::sqrt(static_cast<float>(cols)));
  };
  m.add("token_embd", {c.vocab_size, h}, 1.0f);
  m.add("output_norm", {h}, 0.1f, 1.0f);
  if (!c.tied_embeddings) mat("output", c.vocab_size, h);
  for (int l = 0; l < c.layers; ++l) {
    auto n = [&](LayerTensor t) { return names::layer_tensor(l, t); };
    m.add(n(LayerTensor::kAttnNorm), {h}, 0.1f, 1.0f);
    m.add(n(LayerTensor::kFfnNorm), {h}, 0.1f, 1.0f);
    if (c.kv_lora_rank > 0) {
      // DeepSeek's latent attention (set_deepseek): q directly or through its latent, [latent | RoPE key] rows, the
      // latent's expansion to every head's keys and values.
      const int64_t qk = int64_t{c.heads} * (c.qk_nope_dim + c.qk_rope_dim);
      if (c.q_lora_rank > 0) {
        mat(n(LayerTensor::kAttnQA), c.q_lora_rank, h);
        m.add(n(LayerTensor::kAttnQANorm), {c.q_lora_rank}, 0.1f, 1.0f);
        mat(n(LayerTensor::kAttnQB), qk, c.q_lora_rank);
      } else {
        mat(n(LayerTensor::kAttnQ), qk, h);
      }
      mat(n(LayerTensor::kAttnKvAMqa), c.kv_lora_rank + c.qk_rope_dim, h);
      m.add(n(LayerTensor::kAttnKvANorm), {c.kv_lora_rank}, 0.1f, 1.0f);
      mat(n(LayerTensor::kAttnKvB), int64_t{c.heads} * (c.qk_nope_dim + c.v_head_dim), c.kv_lora_rank);
      mat(n(LayerTensor::kAttnOutput), h, int64_t{c.heads} * c.v_head_dim);
    } else {
      mat(n(LayerTensor::kAttnQ), q, h);
      mat(n(LayerTensor::kAttnK), kv, h);
      mat(n(LayerTensor::kAttnV), kv, h);
      mat(n(LayerTensor::kAttnOutput), h, q);
    }
    if (c.attention_bias) {
      m.add(names::bias_of(n(LayerTensor::kAttnQ)), {q}, 0.1f);
      m.add(names::bias_of(n(LayerTensor::kAttnK)), {kv}, 0.1f);
      m.add(names::bias_of(n(LayerTensor::kAttnV)), {kv}, 0.1f);
    }
    if (c.qk_norm) {
      m.add(n(LayerTensor::kAttnQNorm), {c.head_dim}, 0.1f, 1.0f);
      m.add(n(LayerTensor::kAttnKNorm), {c.head_dim}, 0.1f, 1.0f);
    }
    if (c.post_norms) {
      m.add(n(LayerTensor::kAttnPostNorm), {h}, 0.1f, 1.0f);
      m.add(n(LayerTensor::kFfnPostNorm), {h}, 0.1f, 1.0f);
    }
    if (c.attention_sinks) m.add(n(LayerTensor::kAttnSinks), {c.heads}, 1.0f);
    if (c.router_bias) m.add(names::bias_of(n(LayerTensor::kFfnGateInp)), {c.experts}, 0.5f);
    if (c.expert_bias) {
      m.add(names::bias_of(n(LayerTensor::kFfnGateExps)), {c.experts, c.expert_ffn}, 0.5f);
      m.add(names::bias_of(n(LayerTensor::kFfnUpExps)), {c.experts, c.expert_ffn}, 0.5f);
      m.add(names::bias_of(n(LayerTensor::kFfnDownExps)), {c.experts, h}, 0.5f);
    }
    const bool moe = c.experts > 0 && l >= c.leading_dense_layers;
    if (moe && c.expert_choice_bias) m.add(names::bias_of(n(LayerTensor::kExpProbsB)), {c.experts}, 0.05f);
    if (moe && c.shared_expert_ffn > 0) {
      mat(n(LayerTensor::kFfnGateShexp), c.shared_expert_ffn, h);
      mat(n(LayerTensor::kFfnUpShexp), c.shared_expert_ffn, h);
      mat(n(LayerTensor::kFfnDownShexp), h, c.shared_expert_ffn);
    }
    if (moe) {
      mat(n(LayerTensor::kFfnGateInp), c.experts, h);
      const float s = 1.0f / std::sqrt(static_cast<float>(h));
      m.add(n(LayerTensor::kFfnGateExps), {c.experts, c.expert_ffn, h}, s);
      m.add(n(LayerTensor::kFfnUpExps), {c.experts, c.expert_ffn, h}, s);
      m.add(n(LayerTensor::kFfnDownExps), {c.experts, h, c.expert_ffn}, 1.0f / std::sqrt(float(c.expert_ffn)));
    } else {
      mat(n(LayerTensor::kFfnGate), c.ffn, h);
      mat(n(LayerTensor::kFfnUp), c.ffn, h);
      mat(n(LayerTensor::kFfnDown), h, c.ffn);
    }
  }
  if (c.architecture == "phi3") fuse_projections(m);
  return m;
}

inline ModelConfig tiny_llama_config() {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 50;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.ffn = 64;
  c.norm_eps = 1e-5f;
  return c;
}

// LongRoPE for a tiny config (Phi-3's scaling): distinct short and long divisors per rotary pair, an original
// context of 8, and a context of 64 so that the long set applies; cos/sin scaled by 1.2.
inline void set_longrope(ModelConfig* c) {
  const int pairs = (c->rope.rot_dim > 0 ? c->rope.rot_dim : c->head_dim) / 2;
  c->rope.scaling = RopeScaling::kLongRope;
  c->rope.original_context = 8;
  c->context_length = 64;
  c->rope.attn_factor = 1.2f;
  c->rope.short_factor.clear();
  c->rope.long_factor.clear();
  for (int i = 0; i < pairs; ++i) {
    c->rope.short_factor.push_back(1.0f + 0.1f * static_cast<float>(i));
    c->rope.long_factor.push_back(1.0f + 0.9f * static_cast<float>(i));
  }
}

// Gemma 2's features on a tiny config: sqrt(hidden) embeddings, post-norms, GeGLU, a window of 3 on the even
// layers, q·k scaled by 1/sqrt(24), attention scores capped at 5 and logits at 3 (small enough to bend them). Norm
// weights as GGUF stores them (offset 0).
inline void set_gemma2(ModelConfig* c) {
  c->architecture = "gemma2";
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden));
  c->post_norms = true;
  c->activation = Activation::kGeluTanh;
  c->sliding_window = 3;
  c->sliding_window_pattern = 2;
  c->attention_scale = 1.0f / std::sqrt(24.0f);
  c->attn_softcap = 5.0f;
  c->final_softcap = 3.0f;
  c->tied_embeddings = true;
}

// Gemma 3's on top of Gemma 2's: no soft-capping, q/k norms, norms stored as Hugging Face's w of (1 + w), every
// second layer global on a 1e6 base scaled linearly by 4, the windowed ones on an unscaled 10000 base.
inline void set_gemma3(ModelConfig* c) {
  set_gemma2(c);
  c->architecture = "gemma3";
  c->attn_softcap = c->final_softcap = 0.0f;
  c->qk_norm = true;
  c->norm_weight_offset = 1.0f;
  c->rope.theta = 1000000.0f;
  c->rope.scaling = RopeScaling::kLinear;
  c->rope.factor = 4.0f;
  c->rope_local_theta = 10000.0f;
}

// gpt-oss's features on a MoE config: q/k/v biases (its o bias is left to callers that add it, as
// tp_test_models.hpp does), sink logits, a window of 3 on the even layers, router and expert biases, the clamped
// SwiGLU at a limit of 0.5 (small enough to clamp these activations), YaRN without truncation.
inline void set_gpt_oss(ModelConfig* c) {
  c->architecture = "gpt-oss";
  c->attention_bias = true;
  c->attention_sinks = true;
  c->router_bias = c->expert_bias = true;
  c->activation = Activation::kSwigluClamped;
  c->swiglu_limit = 0.5f;
  c->sliding_window = 3;
  c->sliding_window_pattern = 2;
  c->normalize_topk = true;
  c->rope.scaling = RopeScaling::kYarn;
  c->rope.factor = 8.0f;
  c->rope.original_context = 16;
  c->rope.yarn_truncate = false;
}

// DeepSeek's features on a MoE config (experts a multiple of 4): latent attention with nope and RoPE parts of
// head_dim / 2 each, values of head_dim, a kv latent of 4 head_dim (and a q latent as wide for V3), interleaved RoPE
// on the RoPE part; the first layer dense; shared experts as wide as ffn / 2; routing by groups (V2: softmax, the
// best of 4 groups, weights scaled by 1.5; V3: sigmoid with a choice bias, the best 2 of 4 groups by their two best,
// renormalized and scaled by 2.5), YaRN with DeepSeek's softmax scale.
inline void set_deepseek(ModelConfig* c, bool v3) {
  c->architecture = v3 ? "deepseek3" : "deepseek2";
  const int hd = c->head_dim > 0 ? c->head_dim : c->hidden / c->heads;
  c->qk_nope_dim = c->qk_rope_dim = hd / 2;
  c->head_dim = hd;
  c->v_head_dim = hd;
  c->kv_lora_rank = 4 * hd;
  c->q_lora_rank = v3 ? 4 * hd : 0;
  c->kv_heads = c->heads;
  c->rope.rot_dim = hd / 2;
  c->rope.layout = RopeLayout::kInterleaved;
  c->rope.scaling = RopeScaling::kYarn;
  c->rope.factor = 4.0f;
  c->rope.original_context = 16;
  c->attention_scale = 1.3f / std::sqrt(static_cast<float>(hd));
  c->leading_dense_layers = 1;
  c->shared_expert_ffn = c->ffn / 2;
  c->expert_groups = 4;
  c->router_sigmoid = c->expert_choice_bias = c->group_score_top2 = v3;
  c->expert_groups_used = v3 ? 2 : 1;
  c->normalize_topk = v3;
  c->routed_scale = v3 ? 2.5f : 1.5f;
}

// The tiny llama turned into a mixture of experts (4 experts, 2 per token) with per-head q/k norms.
inline ModelConfig tiny_moe_config() {
  ModelConfig c = tiny_llama_config();
  c.experts = 4;
  c.experts_used = 2;
  c.expert_ffn = 32;
  c.qk_norm = true;
  return c;
}

}  // namespace qrt::test
