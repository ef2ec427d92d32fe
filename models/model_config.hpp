// An architecture normalized into plain feature flags. Nothing past models/ branches on an architecture name:
// the one transformer reads these flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope/rope_layout.hpp"

namespace qrt {

enum class RopeScaling { kNone, kLinear, kLlama3, kYarn, kLongRope };

// The MLP's gate activation: SwiGLU's silu, GeGLU with the tanh approximation of GELU (Gemma's
// gelu_pytorch_tanh), or gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g * sigmoid(alpha * g) * (u + 1).
enum class Activation { kSilu, kGeluTanh, kSwigluClamped };

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
  bool yarn_truncate = true;  // floor / ceil the correction range (Hugging Face's default; gpt-oss sets false)
  float attn_factor = 1.0f;
  // LongRoPE (Phi-3): a divisor per rotary pair, the short set within original_context and the long set beyond
  // (GGUF: the rope_factors_short / rope_factors_long tensors); cos/sin scaled by attn_factor.
  std::vector<float> short_factor;
  std::vector<float> long_factor;
};

struct ModelConfig {
  // "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3moe", "phi3", "gemma2", "gemma3", "gpt-oss", "deepseek2",
  // "deepseek3" (reports only)
  std::string architecture;
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
  // Layers with and without the window (Gemma): 0, every layer uses sliding_window; n > 0, layer l attends
  // globally when (l + 1) % n == 0 and through the window otherwise (gemma2: 2, every other layer; gemma3: 6).
  int sliding_window_pattern = 0;
  // RoPE base of the windowed layers when they differ from the global ones (gemma3: 10000, unscaled, while the
  // global layers use rope.theta with rope's scaling); 0 = the same RoPE on every layer.
  float rope_local_theta = 0.0f;
  // Gemma: embeddings multiplied by sqrt(hidden); every RMSNorm weight w applied as (offset + w) (1 in Hugging
  // Face checkpoints, 0 in GGUF, whose converter stored 1 + w); post-norms on the attention and MLP outputs before
  // their residual adds; q·k scaled by attention_scale instead of 1/sqrt(head_dim) (query_pre_attn_scalar^-1/2);
  // attention scores and final logits soft-capped as cap * tanh(x / cap) (0 = off).
  float embedding_scale = 1.0f;
  float norm_weight_offset = 0.0f;
  bool post_norms = false;
  float attention_scale = 0.0f;  // 0 = 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  Activation activation = Activation::kSilu;
  float swiglu_alpha = 1.702f;  // kSwigluClamped's
  float swiglu_limit = 7.0f;
  // gpt-oss: a learned logit per query head joins each softmax (attention sinks); biases on the router and on every
  // expert's projections.
  bool attention_sinks = false;
  bool router_bias = false;
  bool expert_bias = false;
  // Mixture of experts (0 experts = dense MLP)
  int experts = 0;
  int experts_used = 0;
  int expert_ffn = 0;
  bool normalize_topk = true;  // renormalize the selected router weights to sum to 1
  // DeepSeek's routing (ModelConfig::experts > 0): router scores by sigmoid instead of softmax; a per-expert bias
  // (blk.N.exp_probs_b.bias) added to the scores for choosing only; the experts in expert_groups equal groups of
  // which only the expert_groups_used best take part (a group scored by its best expert, or by the sum of its two
  // best biased scores with group_score_top2); the chosen weights multiplied by routed_scale after the optional
  // renormalization.
  bool router_sigmoid = false;
  bool expert_choice_bias = false;
  int expert_groups = 1;
  int expert_groups_used = 1;
  bool group_score_top2 = false;
  float routed_scale = 1.0f;
  int shared_expert_ffn = 0;      // a dense SwiGLU MLP of this width beside the routed experts (0: none)
  int leading_dense_layers = 0;   // the first layers use a dense MLP of width ffn instead of experts
  // DeepSeek-V2/V3 multi-head latent attention (kv_lora_rank > 0). q (from attn_q, or attn_q_a, its norm and
  // attn_q_b when q_lora_rank > 0) holds per head qk_nope_dim dims without and qk_rope_dim dims with RoPE;
  // attn_kv_a_mqa gives a kv_lora_rank latent (normed by attn_kv_a_norm) and one qk_rope_dim key shared by all heads;
  // attn_kv_b expands the latent to per-head keys (qk_nope_dim) and values (v_head_dim). The cache keeps only
  // [rope key | latent] per token, and the expansion is folded into the queries and the outputs (Transformer).
  // head_dim is qk_nope_dim + qk_rope_dim (the softmax scale's), rope.rot_dim qk_rope_dim.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
  // Layers stored after the last that the forward pass does not run (DeepSeek-V3's multi-token-prediction
  // layers, num_nextn_predict_layers): their tensors are skipped, not reported as unused.
  int extra_layers = 0;
  float latent_norm_eps = 1e-6f;  // the q_a and kv_a norms' (their modules' default in the checkpoints' code)
  // Token ids
  int bos_token_id = -1;
  int eos_token_id = -1;
  std::vector<int> extra_eos_token_ids;
};

}  // namespace qrt
