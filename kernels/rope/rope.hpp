// Rotary position embedding, in place, with the frequencies computed on the host (models/rope.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/kv_type.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

struct RopeShape {
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int rot_dim = 0;            // even, <= head_dim; the first rot_dim elements of each head rotate
  float attn_factor = 1.0f;   // multiplies cos and sin
  bool interleaved = false;   // pairs (2i, 2i+1) (GGUF llama); else (i, i + rot_dim/2) (HF / NEOX)
};

// x: [tokens, heads * head_dim] (in place); positions: [tokens]; inv_freq: [rot_dim / 2] (device pointers).
// Pair i of every head of token t turns by positions[t] * inv_freq[i], computed in double as the CPU reference
// does: a float angle would lose whole hundredths of a radian at positions in the tens of thousands.
Status rope(float* x, const int32_t* positions, const float* inv_freq, const RopeShape& shape, cudaStream_t stream);

// One layer's KV cache on the device: k, v [capacity, kv_heads * head_dim] elements of `type`, positions [capacity].
struct KvCacheRef {
  void* k = nullptr;
  void* v = nullptr;
  KvType type = KvType::kF32;
  int32_t* positions = nullptr;
  int64_t capacity = 0;
};

// rope of q [tokens, q_heads * head_dim] and k [tokens, kv_heads * head_dim] in place, then the rotated k and v
// written to the cache at slots[t] with positions[t] recorded (slots outside the cache skipped): the values of
// rope(q), rope(k) and kv_write in one kernel (three launches, those very ops, for a q8_0 cache, whose block
// scales need the whole rotated block). shape.heads is ignored (q_heads and kv_heads say it).
Status rope_kv_write(float* q, float* k, const float* v, int q_heads, int kv_heads, const int32_t* positions,
                     const float* inv_freq, const RopeShape& shape, const int32_t* slots, KvCacheRef cache,
                     cudaStream_t stream);

}  // namespace qrt::kernels
