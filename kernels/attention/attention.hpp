// Causal attention of query rows over a KV cache, with grouped-query heads and an optional sliding window.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/kv_type.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// A paged cache: the k, v and key_pos arrays are a pool of blocks of 2^block_shift rows, and a sequence's key j
// (its j-th slot) lives in pool row table[j >> block_shift] * 2^block_shift + (j & (2^block_shift - 1)). With no
// table, key j is row j. The table's entries are the host's to check (inside the pool); a kernel cannot report.
struct KvPages {
  const int32_t* table = nullptr;  // [capacity >> block_shift] block indices, on the device
  int block_shift = 0;
};

struct AttentionShape {
  int64_t tokens = 0;      // query rows
  int64_t capacity = 0;    // the sequence's slots (keys); [0, min(*key_count, capacity)) are considered
  int heads = 0;
  int kv_heads = 0;        // heads % kv_heads == 0; query head h reads kv head h / (heads / kv_heads)
  int head_dim = 0;
  float scale = 0.0f;      // on q·k
  int sliding_window = 0;  // 0 = unlimited; else key visible only when q_pos - k_pos < sliding_window
  KvType kv_type = KvType::kF32;  // the element type of k and v
  KvPages pages;                   // a paged cache, or none
  // Many sequences of one pool, one query row each (the split kernel only, attention_split): row t reads its key
  // count at key_count[t] and its block table at pages.table + t * table_stride. 0: every row belongs to the one
  // sequence of key_count[0] and pages.table.
  int64_t table_stride = 0;
  float softcap = 0.0f;  // > 0: each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2)
  // [heads] on the device, or null: head h's softmax has one more logit, sinks[h], whose value is zero (gpt-oss).
  // Every kernel starts its running max at the sink and its running sum at 1.
  const float* sinks = nullptr;
};

// Dynamic shared memory the kernel needs for this head_dim; the caller checks it against the device's
// per-block limit (a device property, not a constant).
uint64_t attention_shared_bytes(int head_dim);

// Key j is visible to query t when key_pos[j] <= q_pos[t] (and inside the window); a query with no visible key
// gets zeros.
//   q: [tokens, heads * head_dim]; q_pos: [tokens]; key_count: one int on the device (read when the kernel runs,
//   so a replayed graph sees the current count; clamped to [0, capacity])
//   k, v: [rows, kv_heads * head_dim] elements of shape.kv_type (the cache rows); key_pos: [rows]; rows = capacity,
//   or the pool's rows when shape.pages has a table
//   out: [tokens, heads * head_dim], not overlapping q.
// One block per (query row, head) walks the keys in chunks of 32 with an online softmax, so a single decode row
// needs no second pass and no workspace.
Status attention(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                 const int32_t* key_count, const AttentionShape& shape, float* out, cudaStream_t stream);

// Appends rows to a KV cache: row i of k and v goes to slot slots[i], whose position becomes positions[i]. A slot
// outside [0, capacity) is skipped (the caller checks them on the host; a kernel cannot report).
//   k, v: [rows, kv_dim]; slots, positions: [rows]; cache_k, cache_v: [capacity, kv_dim] elements of cache_type
//   (rounded to nearest even; q8_0: Q8_0 blocks as the CPU backend quantizes them); cache_pos: [capacity]
Status kv_write(const float* k, const float* v, const int32_t* slots, const int32_t* positions, int64_t rows,
                int64_t kv_dim, void* cache_k, void* cache_v, KvType cache_type, int32_t* cache_pos,
                int64_t capacity, cudaStream_t stream);

}  // namespace qrt::kernels
