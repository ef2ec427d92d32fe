// An architecture normalized into plain feature flags. Nothing past models/ branches on an architecture name:
// the one transformer reads these flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope/rope_layout.hpp"

namespace qrt {

enum class RopeScaling { kNone, kLinear, kLlama3, kYarn, kLongRope };

struct RopeConfig {
  RopeLayout layout = RopeLayout::kHalfSplit;
  float theta = 10000.0f;
  int rot_dim = 0;  // rotary dims per head (0 = head_dim)
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;
  // Llama 3.x
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 0;
  // YaRN
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float attn_factor = 1.0f;
  // LongRoPE (Phi-3): a divisor per rotary pair, the short set within original_context and the long set beyond
  // (GGUF: the rope_factors_short / rope_factors_long tensors); cos/sin scaled by attn_factor.
  std::vector<float> short_factor;
  std::vector<float> long_factor;
};

struct ModelConfig {
  std::string architecture;  // "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3moe", "phi3" (for reports only)
  int vocab_size = 0;
  int hidden = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;               // dense MLP width
  int context_length = 0;
  float norm_eps = 1e-5f;
  RopeConfig rope;
  bool qk_norm = false;       // per-head RMSNorm on q and k before RoPE (qwen3)
  bool attention_bias = false;  // q/k/v biases (qwen2); o bias follows attention_out_bias
  bool attention_out_bias = false;
  bool mlp_bias = false;
  bool tied_embeddings = false;
  int sliding_window = 0;     // 0 = full attention
  // Mixture of experts (0 experts = dense MLP)
  int experts = 0;
  int experts_used = 0;
  int expert_ffn = 0;
  bool normalize_topk = true;  // renormalize the selected router weights to sum to 1
  // Token ids
  int bos_token_id = -1;
  int eos_token_id = -1;
  std::vector<int> extra_eos_token_ids;
};

}  // namespace qrt
