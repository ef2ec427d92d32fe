// Models for the tensor-parallel tests (threads in tests/unit/tp, processes in tests/e2e/tp): random tiny
// models of every architecture's features in several formats, and the forward run whose logits are compared.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "tests/unit/model/tiny_model.hpp"

namespace qrt::test {

using quant::FormatId;

inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

// Requantizes every matrix of the model (expert stacks one expert at a time, as backends store them).
inline void requantize(test::TinyModel& m, FormatId format, int group_size) {
  quant::QuantParams p;
  p.group_size = group_size;
  p.scale_type = quant::ScalarType::kF16;
  for (auto& [name, t] : m.tensors) {
    if (t.shape.size() < 2) continue;
    const int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape.back();
    const int64_t matrices = t.rows() / rows;
    const float* x = reinterpret_cast<const float*>(t.data.data);
    std::vector<uint8_t>&data = m.storage.emplace_back(), &scales = m.storage.emplace_back(),
                        &biases = m.storage.emplace_back();
    for (int64_t e = 0; e < matrices; ++e) {
      auto q = cpu::quantize(format, x + e * rows * cols, rows, cols, p);
      ASSERT_TRUE(q.ok()) << name << ": " << q.status().to_string();
      data.insert(data.end(), q->data.begin(), q->data.end());
      scales.insert(scales.end(), q->scales.begin(), q->scales.end());
      biases.insert(biases.end(), q->biases.begin(), q->biases.end());
    }
    t.format = format;
    t.params = p;
    t.data = {data.data(), data.size()};
    t.scales = {scales.data(), scales.size()};
    t.biases = {biases.data(), biases.size()};
  }
}

inline std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 13 + 3) % vocab;
  return t;
}

// Prompt as a batch, then two single steps: logits of every position.
inline Status run(Transformer& model, std::vector<float>* out) {
  const auto tokens = some_tokens(9, model.config().vocab_size);
  QRT_ASSIGN_OR_RETURN(auto seq, model.new_sequence(16));
  std::vector<float> logits;
  QRT_TRY(model.forward(*seq, std::span(tokens).first(7), LogitsFor::kAll, &logits));
  *out = logits;
  for (size_t i = 7; i < tokens.size(); ++i) {
    QRT_TRY(model.forward(*seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &logits));
    out->insert(out->end(), logits.begin(), logits.end());
  }
  return ok_status();
}

// The tiny model builder adds q/k/v biases only; the row-parallel o and down biases matter most here.
inline void add_biases(TinyModel& m) {
  const ModelConfig& c = m.config;
  for (int l = 0; l < c.layers; ++l) {
    using names::LayerTensor;
    if (c.attention_out_bias) m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kAttnOutput)), {c.hidden}, 0.5f);
    if (c.mlp_bias) {
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnGate)), {c.ffn}, 0.5f);
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnUp)), {c.ffn}, 0.5f);
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnDown)), {c.hidden}, 0.5f);
    }
  }
}

struct Case {
  std::string name;
  ModelConfig config;
  FormatId format;
  int group_size;
};

inline ModelConfig base_config(const std::string& arch) {
  ModelConfig c = tiny_llama_config();
  c.architecture = arch;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.ffn = 128;
  return c;
}

inline std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"llama_f32", base_config("llama"), FormatId::kF32, 0});
  ModelConfig mistral = base_config("mistral");
  mistral.sliding_window = 4;
  mistral.kv_heads = 4;
  out.push_back({"mistral_q8_0", mistral, FormatId::kQ8_0, 0});
  ModelConfig qwen2 = base_config("qwen2");
  qwen2.attention_bias = qwen2.attention_out_bias = qwen2.mlp_bias = true;  // reduced biases too
  qwen2.tied_embeddings = true;
  out.push_back({"qwen2_biases_q4_0", qwen2, FormatId::kQ4_0, 0});
  ModelConfig qwen3 = base_config("qwen3");
  qwen3.qk_norm = true;
  out.push_back({"qwen3_afq4", qwen3, FormatId::kAFQ4, 32});
  out.push_back({"llama_mxfp4", base_config("llama"), FormatId::kMXFP4, 0});
  ModelConfig mixtral = base_config("mixtral");
  mixtral.experts = 4;
  mixtral.experts_used = 2;
  mixtral.expert_ffn = 128;  // 64 or 32 per rank: whole Q8_0 blocks, so the experts are split
  out.push_back({"mixtral_split_experts_q8_0", mixtral, FormatId::kQ8_0, 0});
  ModelConfig qwen3moe = base_config("qwen3moe");
  qwen3moe.qk_norm = true;
  qwen3moe.experts = 4;
  qwen3moe.experts_used = 2;
  qwen3moe.normalize_topk = false;
  qwen3moe.expert_ffn = 96;  // 48 or 24 per rank: not whole Q8_0 blocks, so the experts are replicated
  out.push_back({"qwen3moe_replicated_experts_q8_0", qwen3moe, FormatId::kQ8_0, 0});
  ModelConfig phi3 = base_config("phi3");  // fused qkv and gate_up, split and then sliced by every rank
  set_longrope(&phi3);
  out.push_back({"phi3_fused_longrope_q8_0", phi3, FormatId::kQ8_0, 0});
  // Post-norms after the all-reduce (they need the whole sum), soft-capped scores of each rank's heads, the windowed
  // layers' own RoPE on the ranks' slices.
  ModelConfig gemma2 = base_config("gemma2");
  set_gemma2(&gemma2);
  out.push_back({"gemma2_softcaps_q8_0", gemma2, FormatId::kQ8_0, 0});
  ModelConfig gemma3 = base_config("gemma3");
  set_gemma3(&gemma3);
  out.push_back({"gemma3_local_global_q4_0", gemma3, FormatId::kQ4_0, 0});
  // Sinks sliced with the heads; expert biases sliced with the experts (gate/up columns) or added on rank 0 (down),
  // or whole on every rank when the experts are replicated.
  ModelConfig gpt_oss = base_config("gpt-oss");
  gpt_oss.experts = 4;
  gpt_oss.experts_used = 2;
  gpt_oss.expert_ffn = 128;
  set_gpt_oss(&gpt_oss);
  gpt_oss.attention_out_bias = true;
  out.push_back({"gpt_oss_split_experts_q8_0", gpt_oss, FormatId::kQ8_0, 0});
  gpt_oss.expert_ffn = 96;
  out.push_back({"gpt_oss_replicated_experts_q8_0", gpt_oss, FormatId::kQ8_0, 0});
  // Latent attention: q and o sliced by heads, the latent whole on every rank, each rank's per-head stacks; shared
  // experts sliced like a dense MLP, added before the all-reduce (split experts) or after their own (replicated).
  ModelConfig deepseek = base_config("deepseek2");
  deepseek.experts = 8;
  deepseek.experts_used = 2;
  deepseek.expert_ffn = 128;
  set_deepseek(&deepseek, false);
  out.push_back({"deepseek2_split_experts_q8_0", deepseek, FormatId::kQ8_0, 0});
  set_deepseek(&deepseek, true);
  deepseek.expert_ffn = 96;
  out.push_back({"deepseek3_replicated_experts_q8_0", deepseek, FormatId::kQ8_0, 0});
  return out;
}

// The model of a case, biases added and requantized.
inline TinyModel build_case_model(const Case& c) {
  TinyModel m = make_tiny_model(c.config);
  add_biases(m);
  if (c.format != FormatId::kF32) requantize(m, c.format, c.group_size);
  return m;
}

}  // namespace qrt::test
