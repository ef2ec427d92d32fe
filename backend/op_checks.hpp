// Shape rules of the Backend ops (backend.hpp), written once as plain host code so that a device backend checks
// exactly what the CPU reference checks, before anything is launched. Each function returns the error the op
// must return, naming the op and the shapes it was given; memory ranges (is a view inside an allocation) are the
// backend's own business and are not checked here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace qrt::op_checks {

std::string shape_string(const std::vector<int64_t>& shape);
std::string shape_string(int64_t rows, int64_t cols);
template <class T>
std::string view_string(const DeviceView<T>& v) {
  return shape_string(v.rows, v.cols);
}

inline std::string view_string(const KvView& v) {
  return shape_string(v.rows, v.cols) + " " + std::string(kv_type_name(v.type));
}

// Whether the byte ranges of two views intersect.
template <class A, class B>
bool overlaps(const DeviceView<A>& a, const DeviceView<B>& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  const auto a1 = a0 + static_cast<uintptr_t>(a.numel()) * sizeof(A);
  const auto b1 = b0 + static_cast<uintptr_t>(b.numel()) * sizeof(B);
  return a0 < b1 && b0 < a1;
}

// upload_weight's rules, the same for every backend: 1 to 3 positive dims of at most 2^50 elements in all, legal
// for the format, and spans of exactly the part sizes (a 3-D stack being `shape[0]` matrices packed one after
// another). Returns the part sizes of one [shape[-2], shape[-1]] matrix. Errors start with "uploading NAME".
Result<quant::PartSizes> weight_matrix_parts(const QuantTensor& t);

// A view with a negative dimension.
template <class T>
Status check_non_negative(const DeviceView<T>& v, const char* op, const char* what) {
  if (v.rows < 0 || v.cols < 0)
    return invalid_argument(std::string(op) + ": " + what + " has a negative shape " + view_string(v));
  return ok_status();
}

inline Status check_non_negative(const KvView& v, const char* op, const char* what) {
  return check_non_negative(v.byte_view(), op, what);
}

// table: [vocab, dim]; tokens: [n, 1]; out: [n, dim].
Status embed(const WeightInfo& table, ConstI32View tokens, F32View out);
// x, out: [rows, dim]; weight: [dim]; out is x or does not overlap it.
Status rms_norm(ConstF32View x, const WeightInfo& weight, F32View out);
// x: [n, in]; w: [out, in]; bias (may be null): [out]; y: [n, out], not overlapping x.
Status linear(ConstF32View x, const WeightInfo& w, const WeightInfo* bias, F32View y);
// x: [tokens, heads * head_dim]; positions: [tokens, 1]; inv_freq: [rot_dim / 2].
Status rope(F32View x, int heads, ConstI32View positions, const RopeParams& p);
// k, v: [tokens, kv_dim]; slots, positions: [tokens, 1]. The slot values are checked by kv_slots.
Status kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k, ConstF32View v);
// Host values of kv_write's slots (the CPU backend): each inside [0, capacity).
Status kv_slots(const KvLayerView& cache, const int32_t* slots, int64_t count);
// q, out: [tokens, heads * head_dim]; cache k/v: [capacity, kv_heads * head_dim]; keys: [1, 1]. The count itself
// is checked by key_count.
Status attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                 const AttentionParams& p, F32View out);
// attention_batch's shapes: q and out [items, heads * head_dim], q_positions and keys [items, 1], tables
// [items, blocks >= 1], a pool whose block size is a power of two dividing its rows (the cache checks of attention).
Status attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool, ConstI32View tables,
                       ConstI32View keys, const AttentionParams& params, F32View out);
// Host value of attention's key count (the CPU backend): 0 <= keys <= capacity.
Status key_count(const KvLayerView& cache, int64_t keys);
// gate, up, out: [n, d] (silu_mul); a, b, out: [n, d] (add).
Status same_shape3(const char* op, const char* a_name, ConstF32View a, const char* b_name, ConstF32View b,
                   F32View out);
// y: [tokens * top_k, d]; table: [experts, d]; ids: [tokens, top_k].
Status add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids);
// x, out: [n, d] (scale; softcap also needs a positive finite cap).
Status elementwise(const char* op, ConstF32View x, F32View out);
Status softcap(ConstF32View x, float cap, F32View out);
// logits: [tokens, experts]; ids, weights: [tokens, top_k], 1 <= top_k <= experts.
Status moe_route(ConstF32View logits, I32View ids, F32View weights);
// moe_route's shapes, and DeepSeek's groups: dividing the experts, groups_used of them able to supply top_k.
Status moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids, F32View weights);
Status concat_cols(ConstF32View a, ConstF32View b, F32View out);
// w: [experts, out, in]; ids: [tokens, top_k]; x: [tokens, in] or [tokens * top_k, in]; y: [tokens * top_k, out].
Status linear_experts(ConstF32View x, const WeightInfo& w, ConstI32View ids, F32View y);
// y: [tokens * top_k, d]; weights: [tokens, top_k]; out: [tokens, d], overlapping neither input.
Status moe_combine(ConstF32View y, ConstF32View weights, F32View out);
// x: [n, d]; rows: [k, 1]; out: [k, d], not overlapping x. The row values are the CPU backend's to check.
Status gather_rows(ConstF32View x, ConstI32View rows, F32View out);
// logits: [rows, vocab]; ids: [rows, 1].
Status argmax(ConstF32View logits, I32View ids);
// logits: [rows, vocab < 2^31]; ids: [rows, 1]; the step's parameters, u01 in [0, 1) for every row, and penalty
// offsets / tokens / counts in range with distinct tokens per row.
Status sample(ConstF32View logits, const SampleStep& step, I32View ids);

}  // namespace qrt::op_checks
