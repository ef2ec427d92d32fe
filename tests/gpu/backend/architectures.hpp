// The thirteen architectures' distinguishing features as tiny ModelConfigs (256 wide, so every format's blocks fit):
// llama, llama 3 with GGUF's interleaved RoPE and llama3 scaling, mistral with a sliding window, qwen2 with biases
// and a tied output, qwen3 with q/k norms, mixtral, qwen3moe, phi3 with fused projections and LongRoPE, gemma2,
// gemma3, gpt-oss and deepseek2/3 (tiny_model.hpp's set_gemma2 / set_gemma3 / set_gpt_oss / set_deepseek). Shared
// by the GPU model tests.
#pragma once

#include <string>
#include <vector>

#include "models/model_config.hpp"
#include "tiny_model.hpp"

namespace qrt::test {

struct Architecture {
  std::string name;
  ModelConfig config;
};

inline std::vector<Architecture> architectures() {
  ModelConfig base = test::tiny_llama_config();
  base.hidden = 256;
  base.heads = 4;
  base.kv_heads = 2;
  base.head_dim = 64;
  base.ffn = 512;
  base.layers = 2;
  std::vector<Architecture> out;
  out.push_back({"llama", base});
  ModelConfig llama3 = base;  // a GGUF llama 3: interleaved pairs, llama3 frequency scaling, untied output
  llama3.rope.layout = RopeLayout::kInterleaved;
  llama3.rope.scaling = RopeScaling::kLlama3;
  llama3.rope.factor = 8.0f;
  llama3.rope.original_context = 64;
  llama3.rope.theta = 500000.0f;
  out.push_back({"llama3", llama3});
  ModelConfig mistral = base;
  mistral.sliding_window = 3;
  out.push_back({"mistral", mistral});
  ModelConfig qwen2 = base;
  qwen2.attention_bias = true;
  qwen2.tied_embeddings = true;
  out.push_back({"qwen2", qwen2});
  ModelConfig qwen3 = base;
  qwen3.qk_norm = true;
  out.push_back({"qwen3", qwen3});
  ModelConfig mixtral = base;
  mixtral.experts = 4;
  mixtral.experts_used = 2;
  mixtral.expert_ffn = 256;
  out.push_back({"mixtral", mixtral});
  ModelConfig qwen3moe = mixtral;
  qwen3moe.qk_norm = true;
  qwen3moe.normalize_topk = false;
  out.push_back({"qwen3moe", qwen3moe});
  ModelConfig phi3 = base;  // fused qkv and gate_up (make_tiny_model fuses them for "phi3"), LongRoPE
  phi3.architecture = "phi3";
  test::set_longrope(&phi3);
  out.push_back({"phi3", phi3});
  ModelConfig gemma2 = base;  // post-norms, GeGLU, alternating window, soft-capped attention and logits
  test::set_gemma2(&gemma2);
  out.push_back({"gemma2", gemma2});
  ModelConfig gemma3 = base;  // q/k norms, (1 + w) norms, local and global RoPE
  test::set_gemma3(&gemma3);
  out.push_back({"gemma3", gemma3});
  ModelConfig gpt_oss = mixtral;  // sinks, router and expert biases, clamped SwiGLU, alternating window, YaRN
  test::set_gpt_oss(&gpt_oss);
  out.push_back({"gpt-oss", gpt_oss});
  ModelConfig deepseek2 = mixtral;  // latent attention (a 288-wide cache row), grouped softmax routing, shared experts
  deepseek2.experts = 8;
  test::set_deepseek(&deepseek2, false);
  out.push_back({"deepseek2", deepseek2});
  ModelConfig deepseek3 = deepseek2;  // and q's latent, sigmoid routing with a choice bias, renormalized weights
  test::set_deepseek(&deepseek3, true);
  out.push_back({"deepseek3", deepseek3});
  for (Architecture& a : out) a.config.architecture = a.name;
  return out;
}

}  // namespace qrt::test
