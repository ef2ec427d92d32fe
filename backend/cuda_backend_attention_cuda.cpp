// The CUDA backend's KV cache and attention ops: the KV write (alone and fused with RoPE), attention of one
// sequence (tensor-core prompt kernel, split decode kernel, per-head kernel) and of a batch of decode rows in one
// paged pool (attention_batch), and the workspaces they ask for.
#include <algorithm>
#include <bit>
#include <string>

#include "backend/cuda_backend.hpp"
#include "backend/op_checks.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/attention_latent.hpp"
#include "kernels/attention/attention_latent_mma.hpp"
#include "kernels/attention/attention_prefill_tc.hpp"
#include "kernels/attention/attention_split.hpp"
#include "kernels/rope/rope.hpp"

namespace qrt {

Status CudaBackend::check_kv_write(const char* op, const KvLayerView& cache, ConstI32View slots,
                                   ConstI32View positions, ConstF32View k, ConstF32View v) const {
  QRT_TRY(op_checks::kv_write(cache, slots, positions, k, v));
  QRT_TRY(check_view(k, op, "k"));
  QRT_TRY(check_view(v, op, "v"));
  QRT_TRY(check_view(slots, op, "slots"));
  QRT_TRY(check_view(positions, op, "positions"));
  QRT_TRY(check_view(cache.k.byte_view(), op, "cache k"));
  QRT_TRY(check_view(cache.v.byte_view(), op, "cache v"));
  return check_view(cache.positions, op, "cache positions");
}

Status CudaBackend::kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                             ConstF32View v) {
  forget_q8_source();
  QRT_TRY(check_kv_write("kv_write", cache, slots, positions, k, v));
  if (k.numel() == 0) return ok_status();
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return kernels::kv_write(k.data, v.data, slots.data, positions.data, k.rows, k.cols, cache.k.data, cache.v.data,
                           cache.k.type, cache.positions.data, cache.k.rows, ctx_->compute_stream());
}

Status CudaBackend::rope_kv_write(F32View q, F32View k, ConstF32View v, int heads, int kv_heads,
                                  ConstI32View positions, const RopeParams& p, const KvLayerView& cache,
                                  ConstI32View slots) {
  forget_q8_source();
  const char* op = "rope_kv_write";
  QRT_TRY(op_checks::rope(q, heads, positions, p));
  QRT_TRY(op_checks::rope(k, kv_heads, positions, p));
  QRT_TRY(check_kv_write(op, cache, slots, positions, k, v));
  QRT_TRY(check_view(q, op, "q"));
  QRT_TRY(check_view(p.inv_freq, op, "inv_freq"));
  if (q.rows == 0) return ok_status();
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  const kernels::RopeShape shape{q.rows, heads, p.head_dim, p.rot_dim, p.attn_factor,
                                 p.layout == RopeLayout::kInterleaved};
  const kernels::KvCacheRef ref{cache.k.data, cache.v.data, cache.k.type, cache.positions.data, cache.k.rows};
  return kernels::rope_kv_write(q.data, k.data, v.data, heads, kv_heads, positions.data, p.inv_freq.data, shape,
                                slots.data, ref, ctx_->compute_stream());
}

Status CudaBackend::check_attention_views(const char* op, ConstF32View q, ConstI32View q_positions, ConstI32View keys,
                                          F32View out, const KvLayerView& cache) const {
  QRT_TRY(check_view(q, op, "q"));
  QRT_TRY(check_view(q_positions, op, "q_positions"));
  QRT_TRY(check_view(keys, op, "keys"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(check_view(cache.k.byte_view(), op, "cache k"));
  QRT_TRY(check_view(cache.v.byte_view(), op, "cache v"));
  return check_view(cache.positions, op, "cache positions");
}

Status CudaBackend::attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                              const AttentionParams& p, F32View out) {
  forget_q8_source();
  const char* op = "attention";
  QRT_TRY(op_checks::attention(q, q_positions, cache, keys, p, out));
  QRT_TRY(check_attention_views(op, q, q_positions, keys, out, cache));
  if (cache.paged()) QRT_TRY(check_view(cache.block_table, op, "block table"));
  const uint64_t shared = kernels::attention_shared_bytes(p.head_dim);
  if (shared > ctx_->props().shared_mem_per_block)
    return unsupported("attention: head_dim " + std::to_string(p.head_dim) + " needs " + std::to_string(shared) +
                       " bytes of shared memory per block; " + ctx_->props().name + " has " +
                       std::to_string(ctx_->props().shared_mem_per_block));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  kernels::KvPages pages;
  if (cache.paged()) pages = {cache.block_table.data, std::countr_zero(static_cast<unsigned>(cache.block_size))};
  kernels::AttentionShape shape{q.rows,  cache.slots(),    p.heads,      p.kv_heads, p.head_dim,
                                p.scale, p.sliding_window, cache.k.type, pages};
  shape.softcap = p.softcap;
  shape.sinks = p.sinks;
  if (p.sinks != nullptr) QRT_TRY(check_range(p.sinks, uint64_t(p.heads) * sizeof(float), op, "sinks"));
  if (p.values_are_keys && cache.v.data == cache.k.data) {
    // DeepSeek's latent cache: every row once per block of query heads (attention_latent.hpp), when the workspace
    // was sized for it (decode steps).
    const kernels::AttentionLatentPlan latent = kernels::plan_attention_latent(shape);
    const DeviceBuffer& ws = cache.attention_workspace;
    if (latent.splits > 0 && ws.ptr != nullptr && ws.bytes >= latent.workspace_bytes) {
      QRT_TRY(check_range(ws.ptr, latent.workspace_bytes, op, "attention workspace"));
      return kernels::attention_latent(q.data, q_positions.data, cache.k.data, cache.positions.data, keys.data, shape,
                                       latent, static_cast<float*>(ws.ptr), out.data, ctx_->compute_stream(),
                                       ctx_->props().shared_mem_per_block_optin);
    }
    // A prompt's rows (no workspace sized for them) over a 16-bit cache: one split per row on the tensor cores,
    // normalized in the kernel; other caches take the kernels below.
    if (kernels::attention_latent_rows_applies(shape, cache.k.data, ctx_->props().shared_mem_per_block_optin))
      return kernels::attention_latent_rows(q.data, q_positions.data, cache.k.data, cache.positions.data, keys.data,
                                            shape, out.data, ctx_->compute_stream());
  }
  // A prompt: tensor cores, FlashAttention-2 style; S, P and O in registers for head dims 64, 96, 128 and 256 over
  // f16, bf16, fp8 and q8_0 caches (q8_0 not at 96), else in shared memory over a 16-bit cache.
  if (prefill_attention_registers_ && kernels::attention_prefill_mma_applies(shape, cache.k.data, cache.v.data,
                                                                             ctx_->props().shared_mem_per_block_optin))
    return kernels::attention_prefill_mma(q.data, q_positions.data, cache.k.data, cache.v.data, cache.positions.data,
                                          keys.data, shape, out.data, ctx_->compute_stream());
  if (kernels::attention_prefill_tc_applies(shape, ctx_->props().shared_mem_per_block_optin))
    return kernels::attention_prefill_tc(q.data, q_positions.data, cache.k.data, cache.v.data, cache.positions.data,
                                         keys.data, shape, out.data, ctx_->compute_stream());
  const kernels::AttentionSplitPlan plan = kernels::plan_attention_split(shape);
  const DeviceBuffer& ws = cache.attention_workspace;
  if (plan.splits > 0 && ws.ptr != nullptr && ws.bytes >= plan.workspace_bytes &&
      plan.shared_bytes <= ctx_->props().shared_mem_per_block &&
      kernels::attention_split_aligned(cache.k.data, cache.v.data, cache.k.type)) {
    QRT_TRY(check_range(ws.ptr, plan.workspace_bytes, op, "attention workspace"));
    return attention_split(q, q_positions, cache, keys, p, shape, plan, out);
  }
  return kernels::attention(q.data, q_positions.data, cache.k.data, cache.v.data, cache.positions.data, keys.data,
                            shape, out.data, ctx_->compute_stream());
}

// The batch's split plan: the pool's block size as the pages' shift, every row's table `slots` long.
static kernels::AttentionShape batch_attention_shape(int64_t items, const AttentionParams& p, int64_t slots,
                                                     KvType type, const int32_t* tables, int block_size,
                                                     int64_t table_blocks) {
  const kernels::KvPages pages{tables, std::countr_zero(static_cast<unsigned>(block_size))};
  kernels::AttentionShape shape{items, slots, p.heads, p.kv_heads, p.head_dim, p.scale, p.sliding_window,
                                type,  pages, table_blocks};
  shape.softcap = p.softcap;
  shape.sinks = p.sinks;
  return shape;
}

Status CudaBackend::attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool,
                                    ConstI32View tables, ConstI32View keys, const AttentionParams& p, F32View out) {
  forget_q8_source();
  const char* op = "attention_batch";
  QRT_TRY(op_checks::attention_batch(q, q_positions, pool, tables, keys, p, out));
  if (q.rows == 0) return ok_status();
  const kernels::AttentionShape shape = batch_attention_shape(q.rows, p, tables.cols * pool.block_size, pool.k.type,
                                                              tables.data, pool.block_size, tables.cols);
  if (p.values_are_keys && pool.v.data == pool.k.data) {
    const kernels::AttentionLatentPlan latent = kernels::plan_attention_latent(shape);
    const DeviceBuffer& ws = pool.attention_workspace;
    if (latent.splits > 0 && ws.ptr != nullptr && ws.bytes >= latent.workspace_bytes) {
      QRT_TRY(check_attention_views(op, q, q_positions, keys, out, pool));
      QRT_TRY(check_view(tables, op, "tables"));
      QRT_TRY(check_range(ws.ptr, latent.workspace_bytes, op, "attention workspace"));
      if (p.sinks != nullptr) QRT_TRY(check_range(p.sinks, uint64_t(p.heads) * sizeof(float), op, "sinks"));
      QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
      return kernels::attention_latent(q.data, q_positions.data, pool.k.data, pool.positions.data, keys.data, shape,
                                       latent, static_cast<float*>(ws.ptr), out.data, ctx_->compute_stream(),
                                       ctx_->props().shared_mem_per_block_optin);
    }
  }
  const kernels::AttentionSplitPlan plan = kernels::plan_attention_split(shape);
  const DeviceBuffer& ws = pool.attention_workspace;
  if (plan.splits <= 0 || ws.ptr == nullptr || ws.bytes < plan.workspace_bytes ||
      plan.shared_bytes > ctx_->props().shared_mem_per_block ||
      !kernels::attention_split_aligned(pool.k.data, pool.v.data, pool.k.type))
    return Backend::attention_batch(q, q_positions, pool, tables, keys, p, out);
  QRT_TRY(check_attention_views(op, q, q_positions, keys, out, pool));
  QRT_TRY(check_view(tables, op, "tables"));
  QRT_TRY(check_range(ws.ptr, plan.workspace_bytes, op, "attention workspace"));
  if (p.sinks != nullptr) QRT_TRY(check_range(p.sinks, uint64_t(p.heads) * sizeof(float), op, "sinks"));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ctx_->activate());
  return attention_split(q, q_positions, pool, keys, p, shape, plan, out);
}

// The split kernels over kv's cache and workspace (checked by the callers). The merge also quantizes the output for
// the output projection's GEMV when a warp's 32 outputs are one activation block (head_dim a multiple of 32) and
// the rows fit the GEMV.
Status CudaBackend::attention_split(ConstF32View q, ConstI32View q_positions, const KvLayerView& kv,
                                    ConstI32View keys, const AttentionParams& p, const kernels::AttentionShape& shape,
                                    const kernels::AttentionSplitPlan& plan, F32View out) {
  const kernels::Q8Activations q8 =
      p.head_dim % kernels::kQ8BlockCols == 0 ? fused_q8_output(out) : kernels::Q8Activations{};
  QRT_TRY(kernels::attention_split(q.data, q_positions.data, kv.k.data, kv.v.data, kv.positions.data, keys.data,
                                   shape, plan, static_cast<float*>(kv.attention_workspace.ptr), out.data,
                                   ctx_->compute_stream(), q8));
  if (q8.codes != nullptr) remember_q8_source(out);
  return ok_status();
}

uint64_t CudaBackend::attention_batch_workspace_bytes(int64_t items, const AttentionParams& p, int64_t slots) const {
  const kernels::AttentionShape shape = batch_attention_shape(items, p, slots, KvType::kF32, nullptr, 1, 1);
  if (p.values_are_keys) {
    const kernels::AttentionLatentPlan latent = kernels::plan_attention_latent(shape);
    const uint64_t one_row = attention_workspace_bytes(1, p, slots);
    if (latent.splits > 0) return std::max(latent.workspace_bytes, one_row);
  }
  const kernels::AttentionSplitPlan plan = kernels::plan_attention_split(shape);
  // Room for the row-by-row fallback as well (Backend::attention_batch reuses the workspace for every row).
  const uint64_t one_row = attention_workspace_bytes(1, p, slots);
  const bool fits = plan.splits > 0 && plan.shared_bytes <= ctx_->props().shared_mem_per_block;
  return fits ? std::max(plan.workspace_bytes, one_row) : one_row;
}

uint64_t CudaBackend::attention_workspace_bytes(int64_t tokens, const AttentionParams& p, int64_t capacity) const {
  const kernels::AttentionShape shape{tokens,  capacity,         p.heads,         p.kv_heads, p.head_dim,
                                      p.scale, p.sliding_window, KvType::kF32, {}};
  if (p.values_are_keys) {
    const kernels::AttentionLatentPlan latent = kernels::plan_attention_latent(shape);
    if (latent.splits > 0) return latent.workspace_bytes;
  }
  const kernels::AttentionSplitPlan plan = kernels::plan_attention_split(shape);
  return plan.splits > 0 && plan.shared_bytes <= ctx_->props().shared_mem_per_block ? plan.workspace_bytes : 0;
}

}  // namespace qrt
