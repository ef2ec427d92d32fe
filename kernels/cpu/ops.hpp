// CPU reference implementations of the transformer ops (everything but the quantized linear, which lives in
// quant_reference). Plain loops over host float arrays, accumulating in double: these are the oracles that the
// CUDA kernels are tested against, so they favour obviously-correct over fast. They check nothing: callers
// (the CPU backend, tests) validate shapes first.
#pragma once

#include <cstdint>

#include "kernels/moe/moe_routing.hpp"

namespace qrt::cpu {

// out = x / sqrt(mean(x²) + eps) * weight, row by row.  x, out: [rows, dim]; weight: [dim].
// out may alias x.
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out);

// Rotary position embedding, in place.  x: [tokens, heads, head_dim]; positions: [tokens];
// inv_freq: [rot_dim / 2] (pair i turns by positions[t] * inv_freq[i]); only the first rot_dim elements of each
// head rotate. interleaved: pairs (2i, 2i+1) (GGUF llama); otherwise (i, i + rot_dim/2) (HF / NEOX).
// cos and sin are multiplied by attn_factor (YaRN's magnitude correction; 1 elsewhere).
void rope(float* x, int64_t tokens, int heads, int head_dim, int rot_dim, const int32_t* positions,
          const float* inv_freq, float attn_factor, bool interleaved);

struct AttentionShape {
  int heads = 0;
  int kv_heads = 0;       // heads / kv_heads query heads share one key/value head (GQA)
  int head_dim = 0;
  float scale = 0.0f;     // applied to q·k (usually 1/sqrt(head_dim))
  int sliding_window = 0; // 0 = unlimited; else key visible only when q_pos - k_pos < sliding_window
  float softcap = 0.0f;   // > 0: score = softcap * tanh(scale * q·k / softcap)
  const float* sinks = nullptr;  // [heads]: one more logit per head in each softmax, with a zero value (gpt-oss)
};

// Causal attention of `tokens` queries over `keys` cached keys/values, masked by position: key j is visible to
// query t when key_pos[j] <= q_pos[t] (and inside the sliding window).
//   q: [tokens, heads * head_dim]; q_pos: [tokens]
//   k, v: [keys, kv_heads * head_dim] (cache rows); key_pos: [keys]
//   out: [tokens, heads * head_dim]. A query with no visible key gets zeros.
void attention(const float* q, const int32_t* q_pos, int64_t tokens, const float* k, const float* v,
               const int32_t* key_pos, int64_t keys, const AttentionShape& shape, float* out);

// Numerically stable softmax of one row, in place.  x: [n].
void softmax(float* x, int64_t n);

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).  All [n]; out may alias gate or up.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out = gelu_tanh(gate) * up, gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g³))).  All [n]; out may
// alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit), out = g sigmoid(alpha g) (u + 1).
// All [n]; out may alias gate or up.
void swiglu_clamped_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);

// y[r] += table[ids[r]] for each of the tokens * top_k rows (expert biases).  y: [tokens * top_k, dim];
// table: [experts, dim]; ids: [tokens * top_k], each inside the table (the caller checks).
void add_indexed_rows(float* y, const float* table, const int32_t* ids, int64_t tokens, int top_k, int64_t dim);

// out = s * x.  All [n]; out may alias x.
void scale(const float* x, float s, int64_t n, float* out);

// out = cap * tanh(x / cap).  All [n]; out may alias x.
void softcap(const float* x, float cap, int64_t n, float* out);

// out = a + b.  All [n]; out may alias a or b.
void add(const float* a, const float* b, int64_t n, float* out);

// Mixture-of-experts router: softmax over each token's expert logits, then the top_k largest probabilities
// (ties go to the lower expert id), in decreasing order; renormalize makes the selected weights sum to 1.
//   logits: [tokens, experts]; ids, weights: [tokens, top_k].
void moe_route(const float* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
               float* weights);

// DeepSeek's router (Backend::moe_route_grouped states the rule); routing.choice_bias is a host pointer here.
void moe_route_grouped(const float* logits, int64_t tokens, int experts, int top_k, const MoeRouting& routing,
                       int32_t* ids, float* weights);

// out[i] = [a[i] | b[i]].  a: [rows, a_cols]; b: [rows, b_cols]; out: [rows, a_cols + b_cols].
void concat_cols(const float* a, int64_t a_cols, const float* b, int64_t b_cols, int64_t rows, float* out);

// out[t] = sum_s weights[t, s] * y[t, s].  y: [tokens, top_k, dim]; weights: [tokens, top_k]; out: [tokens, dim].
void moe_combine(const float* y, const float* weights, int64_t tokens, int top_k, int64_t dim, float* out);

}  // namespace qrt::cpu
