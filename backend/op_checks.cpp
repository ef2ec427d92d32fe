#include "backend/op_checks.hpp"

#include "kernels/cpu/quant_reference.hpp"

#include <algorithm>
#include <cmath>

namespace qrt::op_checks {
namespace {

Status shape_error(const char* op, const std::string& what) { return invalid_argument(std::string(op) + ": " + what); }

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shape_string(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

Status embed(const WeightInfo& table, ConstI32View tokens, F32View out) {
  const char* op = "embed";
  if (table.shape.size() != 2)
    return shape_error(op, "table must be [vocab, dim], found " + shape_string(table.shape));
  if (tokens.cols != 1 || out.rows != tokens.rows || out.cols != table.shape[1])
    return shape_error(op, "tokens " + view_string(tokens) + " and out " + view_string(out) + " do not match table " +
                               shape_string(table.shape));
  QRT_TRY(check_non_negative(tokens, op, "tokens"));
  return check_non_negative(out, op, "out");
}

Status rms_norm(ConstF32View x, const WeightInfo& w, F32View out) {
  const char* op = "rms_norm";
  if (w.shape.size() != 1 || w.shape[0] != x.cols || out.rows != x.rows || out.cols != x.cols)
    return shape_error(op, "x " + view_string(x) + ", weight " + shape_string(w.shape) + ", out " + view_string(out));
  QRT_TRY(check_non_negative(x, op, "x"));
  if (x.data != out.data && overlaps(x, out)) return shape_error(op, "out partially overlaps x");
  return ok_status();
}

Status linear(ConstF32View x, const WeightInfo& w, const WeightInfo* bias, F32View y) {
  const char* op = "linear";
  if (w.shape.size() != 2) return shape_error(op, "weight must be [out, in], found " + shape_string(w.shape));
  if (x.cols != w.shape[1] || y.rows != x.rows || y.cols != w.shape[0])
    return shape_error(op, "x " + view_string(x) + " · Wᵀ " + shape_string(w.shape) + " does not fit y " +
                               view_string(y));
  QRT_TRY(check_non_negative(x, op, "x"));
  if (overlaps(x, y)) return shape_error(op, "y overlaps x");
  if (bias != nullptr && (bias->shape.size() != 1 || bias->shape[0] != y.cols))
    return shape_error(op, "bias " + shape_string(bias->shape) + " does not match y " + view_string(y));
  return ok_status();
}

Status rope(F32View x, int heads, ConstI32View positions, const RopeParams& p) {
  const char* op = "rope";
  if (heads <= 0 || p.head_dim <= 0 || x.cols != static_cast<int64_t>(heads) * p.head_dim)
    return shape_error(op, "x " + view_string(x) + " is not [tokens, " + std::to_string(heads) + " * " +
                               std::to_string(p.head_dim) + "]");
  if (p.rot_dim <= 0 || p.rot_dim % 2 != 0 || p.rot_dim > p.head_dim)
    return shape_error(op, "rot_dim " + std::to_string(p.rot_dim) + " must be even and within head_dim " +
                               std::to_string(p.head_dim));
  if (p.inv_freq.numel() != p.rot_dim / 2)
    return shape_error(op, "inv_freq " + view_string(p.inv_freq) + " needs rot_dim / 2 = " +
                               std::to_string(p.rot_dim / 2) + " values");
  if (positions.cols != 1 || positions.rows != x.rows)
    return shape_error(op, "positions " + view_string(positions) + " do not match x " + view_string(x));
  return check_non_negative(x, op, "x");
}

Status kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                ConstF32View v) {
  const char* op = "kv_write";
  if (cache.k.type != cache.v.type)
    return shape_error(op, "cache k " + view_string(cache.k) + " and v " + view_string(cache.v) + " differ in type");
  if (!kv_row_fits(cache.k.type, cache.k.cols))
    return shape_error(op, "cache k " + view_string(cache.k) + ": a q8_0 row must be whole blocks of " +
                               std::to_string(kKvQ8Block) + " elements");
  if (k.rows != v.rows || k.cols != cache.k.cols || v.cols != cache.v.cols || cache.k.rows != cache.v.rows)
    return shape_error(op, "k " + view_string(k) + " / v " + view_string(v) + " do not fit cache " +
                               view_string(cache.k) + " / " + view_string(cache.v));
  if (slots.rows != k.rows || slots.cols != 1 || positions.rows != k.rows || positions.cols != 1)
    return shape_error(op, "slots " + view_string(slots) + " / positions " + view_string(positions) + " for " +
                               std::to_string(k.rows) + " rows");
  if (cache.positions.rows < cache.k.rows || cache.positions.cols != 1)
    return shape_error(op, "cache positions " + view_string(cache.positions) + " for capacity " +
                               std::to_string(cache.k.rows));
  QRT_TRY(check_non_negative(k, op, "k"));
  return check_non_negative(cache.k, op, "cache k");
}

Status kv_slots(const KvLayerView& cache, const int32_t* slots, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (slots[i] < 0 || slots[i] >= cache.k.rows)
      return out_of_range("kv_write: slot " + std::to_string(slots[i]) + " outside the cache capacity " +
                          std::to_string(cache.k.rows));
  return ok_status();
}

Status attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                 const AttentionParams& p, F32View out) {
  const char* op = "attention";
  if (p.heads <= 0 || p.kv_heads <= 0 || p.head_dim <= 0 || p.heads % p.kv_heads != 0)
    return shape_error(op, "heads " + std::to_string(p.heads) + " must be a positive multiple of kv_heads " +
                               std::to_string(p.kv_heads));
  const int64_t q_dim = static_cast<int64_t>(p.heads) * p.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  if (q.cols != q_dim || out.rows != q.rows || out.cols != q_dim || q_positions.rows != q.rows ||
      q_positions.cols != 1)
    return shape_error(op, "q " + view_string(q) + ", positions " + view_string(q_positions) + ", out " +
                               view_string(out) + " for " + std::to_string(p.heads) + " heads of " +
                               std::to_string(p.head_dim));
  if (cache.k.type != cache.v.type)
    return shape_error(op, "cache k " + view_string(cache.k) + " and v " + view_string(cache.v) + " differ in type");
  if (!kv_row_fits(cache.k.type, cache.k.cols))
    return shape_error(op, "cache k " + view_string(cache.k) + ": a q8_0 row must be whole blocks of " +
                               std::to_string(kKvQ8Block) + " elements");
  if (cache.k.cols != kv_dim || cache.v.cols != kv_dim || cache.v.rows != cache.k.rows ||
      cache.positions.rows < cache.k.rows || cache.positions.cols != 1)
    return shape_error(op, "cache k " + view_string(cache.k) + " / v " + view_string(cache.v) + " / positions " +
                               view_string(cache.positions) + " is not [capacity, " + std::to_string(kv_dim) + "]");
  if (keys.rows != 1 || keys.cols != 1) return shape_error(op, "keys " + view_string(keys) + " is not [1, 1]");
  if (cache.paged()) {
    const int b = cache.block_size;
    if (b <= 0 || (b & (b - 1)) != 0 || cache.k.rows % b != 0)
      return shape_error(op, "block size " + std::to_string(b) + " is not a power of two dividing the pool's " +
                                 std::to_string(cache.k.rows) + " rows");
    if (cache.block_table.cols != 1 || cache.block_table.rows < 0)
      return shape_error(op, "block table " + view_string(cache.block_table) + " is not [blocks, 1]");
  }
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap))
    return invalid_argument("attention: softcap must be 0 (off) or positive and finite, found " +
                            std::to_string(p.softcap));
  QRT_TRY(check_non_negative(q, op, "q"));
  QRT_TRY(check_non_negative(cache.k, op, "cache k"));
  if (overlaps(q, out)) return shape_error(op, "out overlaps q");
  return ok_status();
}

Status attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool, ConstI32View tables,
                       ConstI32View keys, const AttentionParams& p, F32View out) {
  const char* op = "attention_batch";
  if (tables.rows != q.rows || tables.cols <= 0 || keys.rows != q.rows || keys.cols != 1)
    return shape_error(op, "tables " + view_string(tables) + " and keys " + view_string(keys) + " for " +
                               std::to_string(q.rows) + " query rows (one table row and one key count per row)");
  // The pool as one sequence's cache over the first table row: attention's checks of everything else.
  const KvLayerView first{pool.k, pool.v, pool.positions, {}, tables.row_range(0, 1).reshaped(tables.cols, 1),
                          pool.block_size};
  QRT_TRY(attention(q, q_positions, first, keys.row_range(0, 1), p, out));
  return check_non_negative(tables, op, "tables");
}

Status key_count(const KvLayerView& cache, int64_t keys) {
  if (keys < 0 || keys > cache.slots())
    return out_of_range("attention: " + std::to_string(keys) + " keys exceed the cache capacity " +
                        std::to_string(cache.slots()));
  if (cache.paged()) {
    const int64_t pool_blocks = cache.k.rows / cache.block_size;
    for (int64_t b = 0; b * cache.block_size < keys; ++b) {
      const int32_t block = cache.block_table.data[b];
      if (block < 0 || block >= pool_blocks)
        return out_of_range("attention: block table entry " + std::to_string(b) + " is " + std::to_string(block) +
                            ", outside the pool of " + std::to_string(pool_blocks) + " blocks");
    }
  }
  return ok_status();
}

Status same_shape3(const char* op, const char* a_name, ConstF32View a, const char* b_name, ConstF32View b,
                   F32View out) {
  if (a.rows != b.rows || a.cols != b.cols || out.rows != a.rows || out.cols != a.cols)
    return shape_error(op, std::string(a_name) + " " + view_string(a) + ", " + b_name + " " + view_string(b) +
                               ", out " + view_string(out));
  return check_non_negative(a, op, a_name);
}

Status add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) {
  const char* op = "add_indexed_rows";
  if (ids.rows * ids.cols != y.rows || table.cols != y.cols || table.rows <= 0)
    return shape_error(op, "y " + view_string(y) + ", table " + view_string(table) + ", ids " + view_string(ids));
  return check_non_negative(y, op, "y");
}

Status elementwise(const char* op, ConstF32View x, F32View out) {
  if (out.rows != x.rows || out.cols != x.cols)
    return shape_error(op, "x " + view_string(x) + ", out " + view_string(out));
  return check_non_negative(x, op, "x");
}

Status softcap(ConstF32View x, float cap, F32View out) {
  if (!(cap > 0.0f) || !std::isfinite(cap))
    return invalid_argument("softcap: the cap must be positive and finite, found " + std::to_string(cap));
  return elementwise("softcap", x, out);
}

Status gather_rows(ConstF32View x, ConstI32View rows, F32View out) {
  const char* op = "gather_rows";
  if (rows.cols != 1 || out.rows != rows.rows || out.cols != x.cols)
    return shape_error(op, "x " + view_string(x) + ", rows " + view_string(rows) + ", out " + view_string(out));
  QRT_TRY(check_non_negative(x, op, "x"));
  if (overlaps(x, out)) return shape_error(op, "out overlaps x");
  return ok_status();
}

Status moe_route(ConstF32View logits, I32View ids, F32View weights) {
  const char* op = "moe_route";
  if (ids.rows != logits.rows || weights.rows != logits.rows || ids.cols != weights.cols || ids.cols <= 0 ||
      ids.cols > logits.cols)
    return shape_error(op, "logits " + view_string(logits) + ", ids " + view_string(ids) + ", weights " +
                               view_string(weights) + " (top_k must be in [1, experts])");
  return check_non_negative(logits, op, "logits");
}

Status moe_route_grouped(ConstF32View logits, const MoeRouting& r, I32View ids, F32View weights) {
  QRT_TRY(moe_route(logits, ids, weights));
  const int64_t experts = logits.cols;
  if (r.groups < 1 || experts % r.groups != 0 || r.groups_used < 1 || r.groups_used > r.groups ||
      r.groups_used * (experts / r.groups) < ids.cols)
    return shape_error("moe_route_grouped", std::to_string(experts) + " experts in " + std::to_string(r.groups) +
                                                " groups, " + std::to_string(r.groups_used) +
                                                " used, cannot supply top_k " + std::to_string(ids.cols));
  if (!(r.scale == r.scale)) return shape_error("moe_route_grouped", "scale is NaN");
  return ok_status();
}

Status concat_cols(ConstF32View a, ConstF32View b, F32View out) {
  const char* op = "concat_cols";
  if (a.rows != b.rows || out.rows != a.rows || out.cols != a.cols + b.cols)
    return shape_error(op, "a " + view_string(a) + ", b " + view_string(b) + ", out " + view_string(out));
  QRT_TRY(check_non_negative(a, op, "a"));
  QRT_TRY(check_non_negative(b, op, "b"));
  if (overlaps(a, out) || overlaps(b, out)) return shape_error(op, "out overlaps an input");
  return ok_status();
}

Status linear_experts(ConstF32View x, const WeightInfo& w, ConstI32View ids, F32View y) {
  const char* op = "linear_experts";
  if (w.shape.size() != 3)
    return shape_error(op, "weight must be [experts, out, in], found " + shape_string(w.shape));
  const int64_t out_dim = w.shape[1], in_dim = w.shape[2];
  const int64_t tokens = ids.rows, top_k = ids.cols;
  const bool shared_input = x.rows == tokens;
  if (top_k <= 0 || tokens < 0 || x.cols != in_dim || (!shared_input && x.rows != tokens * top_k) ||
      y.rows != tokens * top_k || y.cols != out_dim)
    return shape_error(op, "x " + view_string(x) + ", ids " + view_string(ids) + ", y " + view_string(y) +
                               " do not fit weight " + shape_string(w.shape));
  if (overlaps(x, y)) return shape_error(op, "y overlaps x");
  return ok_status();
}

Status moe_combine(ConstF32View y, ConstF32View weights, F32View out) {
  const char* op = "moe_combine";
  const int64_t tokens = weights.rows, top_k = weights.cols;
  if (top_k <= 0 || tokens < 0 || y.rows != tokens * top_k || out.rows != tokens || out.cols != y.cols)
    return shape_error(op, "y " + view_string(y) + ", weights " + view_string(weights) + ", out " + view_string(out));
  QRT_TRY(check_non_negative(y, op, "y"));
  if (overlaps(y, out) || overlaps(weights, out)) return shape_error(op, "out overlaps an input");
  return ok_status();
}

Status argmax(ConstF32View logits, I32View ids) {
  const char* op = "argmax";
  if (logits.rows < 0 || logits.cols <= 0 || ids.rows != logits.rows || ids.cols != 1)
    return shape_error(op, "logits " + view_string(logits) + " and ids " + view_string(ids) +
                               " are not [rows, vocab > 0] and [rows, 1]");
  if (overlaps(logits, ids)) return shape_error(op, "ids overlap logits");
  return ok_status();
}

Status sample(ConstF32View logits, const SampleStep& step, I32View ids) {
  const char* op = "sample";
  if (logits.rows < 0 || logits.cols <= 0 || logits.cols > 2147483647LL || ids.rows != logits.rows || ids.cols != 1)
    return shape_error(op, "logits " + view_string(logits) + " and ids " + view_string(ids) +
                               " are not [rows, 0 < vocab < 2^31] and [rows, 1]");
  if (overlaps(logits, ids)) return shape_error(op, "ids overlap logits");
  if (Status s = validate_sampling_params(step.params); !s.ok())
    return invalid_argument(std::string(op) + ": " + s.message());
  const size_t rows = static_cast<size_t>(logits.rows);
  if (step.u01.size() != rows)
    return shape_error(op, "u01 has " + std::to_string(step.u01.size()) + " draws for " + std::to_string(rows) +
                               " rows");
  for (size_t r = 0; r < rows; ++r)
    if (!(step.u01[r] >= 0.0 && step.u01[r] < 1.0))
      return shape_error(op, "u01[" + std::to_string(r) + "] = " + std::to_string(step.u01[r]) + " is not in [0, 1)");
  if (step.penalty_offsets.empty()) {
    if (!step.penalties.empty()) return shape_error(op, "penalties given without penalty_offsets");
    return ok_status();
  }
  if (step.penalty_offsets.size() != rows + 1 || step.penalty_offsets.front() != 0 ||
      static_cast<size_t>(step.penalty_offsets.back()) != step.penalties.size())
    return shape_error(op, "penalty_offsets must be [rows + 1 = " + std::to_string(rows + 1) + "] from 0 to " +
                               std::to_string(step.penalties.size()) + ", found " +
                               std::to_string(step.penalty_offsets.size()) + " entries");
  std::vector<int32_t> tokens;  // one row's tokens, sorted to find a repeat
  for (size_t r = 0; r < rows; ++r) {
    const int32_t begin = step.penalty_offsets[r], end = step.penalty_offsets[r + 1];
    if (begin > end || static_cast<size_t>(end) > step.penalties.size())
      return shape_error(op, "penalty_offsets decrease or pass the " + std::to_string(step.penalties.size()) +
                                 " penalties at row " + std::to_string(r));
    for (int32_t i = begin; i < end; ++i) {
      const PenaltyCount& c = step.penalties[static_cast<size_t>(i)];
      if (c.token < 0 || c.token >= logits.cols || c.count <= 0)
        return shape_error(op, "penalty " + std::to_string(i) + " of row " + std::to_string(r) + " is (token " +
                                   std::to_string(c.token) + ", count " + std::to_string(c.count) +
                                   "), needs 0 <= token < " + std::to_string(logits.cols) + " and count > 0");
    }
    tokens.clear();
    for (int32_t i = begin; i < end; ++i) tokens.push_back(step.penalties[static_cast<size_t>(i)].token);
    std::sort(tokens.begin(), tokens.end());
    if (const auto twice = std::adjacent_find(tokens.begin(), tokens.end()); twice != tokens.end())
      return shape_error(op, "token " + std::to_string(*twice) + " appears twice in the penalties of row " +
                                 std::to_string(r));
  }
  return ok_status();
}

Result<quant::PartSizes> weight_matrix_parts(const QuantTensor& t) {
  const std::string where = "uploading " + t.name + (t.file.empty() ? "" : " from " + t.file);
  if (t.shape.empty() || t.shape.size() > 3)
    return invalid_argument(where + ": expected 1 to 3 dims, found " + shape_string(t.shape));
  int64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d <= 0) return invalid_argument(where + ": non-positive dim in shape " + shape_string(t.shape));
    if (d > (int64_t{1} << 50) / numel) return invalid_argument(where + ": shape " + shape_string(t.shape) + " is too large");
    numel *= d;
  }
  const int64_t cols = t.shape.back();
  const int64_t matrix_rows = t.shape.size() >= 2 ? t.shape[t.shape.size() - 2] : 1;
  auto parts = cpu::part_sizes(t.format, matrix_rows, cols, t.params);
  if (!parts.ok()) return parts.status().with_context(where);
  const auto matrices = static_cast<uint64_t>(numel / cols / matrix_rows);
  auto check_part = [&](const ByteSpan& span, uint64_t want, const char* part) -> Status {
    if (span.size != want)
      return format_error(where + ": " + std::string(quant::format_name(t.format)) + " " + shape_string(t.shape) +
                          " needs " + std::to_string(want) + " bytes of " + part + ", found " +
                          std::to_string(span.size));
    if (span.size != 0 && span.data == nullptr) return invalid_argument(where + ": null " + part + " span");
    return ok_status();
  };
  QRT_TRY(check_part(t.data, parts->data * matrices, "data"));
  QRT_TRY(check_part(t.scales, parts->scales * matrices, "scales"));
  QRT_TRY(check_part(t.biases, parts->biases * matrices, "biases"));
  return *parts;
}

}  // namespace qrt::op_checks
