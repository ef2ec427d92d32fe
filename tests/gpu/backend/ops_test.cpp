// Every CUDA backend op against the CPU backend on fresh random inputs, with the GPU outputs poisoned first.
// Bounds (relative L2): 1e-5 where the GPU computes in fp32 what the reference computes in double (norm, rope,
// attention, silu, combine, routing weights); exact where both do the same fp32 arithmetic (add, kv_write, ids).
#include <cuda_runtime.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cmath>

#include "backend_pair.hpp"
#include "kernels/attention/attention_split.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

// memory_available, which sizes an engine's pool by share: on the CUDA backend it is cudaMemGetInfo (an allocation
// lowers the free memory by at least its size), on the CPU backend /proc/meminfo (its total is sysinfo's RAM).
class MemoryAvailable : public test::BackendPair {};

TEST_F(MemoryAvailable, FollowsAllocationsAndTheSystemTotal) {
  // The free memory is the device's: a stream of an earlier test's backend, destroyed with a stream-ordered free still
  // queued, may give memory back while this test measures (CudaAllocators before it did, by 5888 bytes). Every
  // stream of the device finishes first.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto before = gpu_->memory_available();
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_GT(before->total_bytes, 0u);
  EXPECT_LE(before->free_bytes, before->total_bytes);
  const uint64_t bytes = uint64_t{256} << 20;
  {
    auto buffer = allocate_scoped(*gpu_, bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
    auto during = gpu_->memory_available();
    ASSERT_TRUE(during.ok());
    EXPECT_EQ(during->total_bytes, before->total_bytes);
    EXPECT_LE(during->free_bytes + bytes, before->free_bytes);
  }
  struct sysinfo si {};
  ASSERT_EQ(sysinfo(&si), 0);
  auto host = cpu_.memory_available();
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  // MemTotal and sysinfo's totalram are the same count of pages.
  EXPECT_EQ(host->total_bytes, static_cast<uint64_t>(si.totalram) * si.mem_unit);
  EXPECT_GT(host->free_bytes, 0u);
  EXPECT_LE(host->free_bytes, host->total_bytes);
}

using test::BackendPair;
using test::Dual;

using CudaOps = BackendPair;

// Widths up to 8192 keep their elements in registers between the kernel's passes, wider ones re-read them.
TEST_F(CudaOps, RmsNormRowsInPlaceAndPerHead) {
  for (int64_t dim : {int64_t{8}, int64_t{33}, int64_t{64}, int64_t{4096}, int64_t{5000}, int64_t{9000}}) {
    for (int64_t rows : {int64_t{1}, int64_t{7}}) {
      const auto x = input(rows, dim, 100 + dim + rows, 2.0f);
      const auto w = f32_weight({dim}, 200 + dim, 0.1f, 1.0f);
      const auto out = output(rows, dim);
      ASSERT_TRUE(cpu_.rms_norm(x.cpu, w.cpu, 1e-5f, out.cpu).ok());
      ASSERT_TRUE(gpu_->rms_norm(x.gpu, w.gpu, 1e-5f, out.gpu).ok());
      expect_close(out, 1e-5, "rms_norm [" + std::to_string(rows) + ", " + std::to_string(dim) + "]");
      // In place (out aliases x), as the transformer's per-head q/k norm uses it.
      ASSERT_TRUE(cpu_.rms_norm(x.cpu, w.cpu, 1e-5f, x.cpu).ok());
      ASSERT_TRUE(gpu_->rms_norm(x.gpu, w.gpu, 1e-5f, x.gpu).ok());
      expect_close(x, 1e-5, "rms_norm in place, dim " + std::to_string(dim));
    }
  }
}

// add_rms_norm (the residual add fused with the norm after it) against the CPU backend's add then rms_norm, and
// bit for bit against the CUDA backend's own add then rms_norm: one kernel under SIMT, x updated in place, widths
// that are and are not a multiple of 32, rows on both sides of the integer-GEMV batch limit.
TEST_F(CudaOps, AddRmsNormIsAddThenNormInOneKernel) {
  for (int64_t dim : {int64_t{33}, int64_t{256}, int64_t{4096}, int64_t{8224}}) {
    for (int64_t rows : {int64_t{1}, int64_t{9}}) {
      const std::string what = "add_rms_norm [" + std::to_string(rows) + ", " + std::to_string(dim) + "]";
      const auto x = input(rows, dim, 250 + dim + rows, 2.0f), delta = input(rows, dim, 260 + dim + rows);
      const auto x2 = input_values(gpu_values(x.gpu), rows, dim);  // the same values, for the unfused run
      const auto w = f32_weight({dim}, 270 + dim, 0.1f, 1.0f);
      const auto out = output(rows, dim), out2 = output(rows, dim);
      ASSERT_TRUE(cpu_.add_rms_norm(x.cpu, delta.cpu, w.cpu, 1e-5f, out.cpu).ok());
#if defined(QRT_SIMT)
      const simt::StreamCounters start = simt::device_counters(0);
#endif
      ASSERT_TRUE(gpu_->add_rms_norm(x.gpu, delta.gpu, w.gpu, 1e-5f, out.gpu).ok());
#if defined(QRT_SIMT)
      EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, 1u) << what;
#endif
      expect_close(out, 1e-5, what);
      expect_close(x, 0.0, what + ": x += delta");
      ASSERT_TRUE(gpu_->add(x2.gpu, delta.gpu, x2.gpu).ok());
      ASSERT_TRUE(gpu_->rms_norm(x2.gpu, w.gpu, 1e-5f, out2.gpu).ok());
      EXPECT_EQ(gpu_values(out.gpu), gpu_values(out2.gpu)) << what << ": fused and unfused differ";
      EXPECT_EQ(gpu_values(x.gpu), gpu_values(x2.gpu)) << what;
    }
  }
}

TEST_F(CudaOps, RopeBothLayoutsPartialRotationLargePositions) {
  struct Case {
    RopeLayout layout;
    int heads, head_dim, rot_dim;
    float attn_factor;
  };
  for (const Case& c : {Case{RopeLayout::kHalfSplit, 4, 64, 64, 1.0f}, Case{RopeLayout::kInterleaved, 4, 64, 64, 1.0f},
                        Case{RopeLayout::kHalfSplit, 2, 128, 32, 0.9f}, Case{RopeLayout::kInterleaved, 3, 80, 40, 1.2f}}) {
    const int64_t tokens = 9;
    std::vector<float> inv(static_cast<size_t>(c.rot_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / c.rot_dim));
    const auto inv_freq = input_values(inv, c.rot_dim / 2, 1);
    // Positions up to ~60k: a float angle would be off by hundredths of a radian there.
    std::vector<int32_t> pos(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7919 + 13) % 60000);
    const auto positions = input_values(pos, tokens, 1);
    const auto x = input(tokens, int64_t{c.heads} * c.head_dim, 300 + c.head_dim);
    RopeParams cp{c.layout, c.head_dim, c.rot_dim, c.attn_factor, inv_freq.cpu};
    RopeParams gp{c.layout, c.head_dim, c.rot_dim, c.attn_factor, inv_freq.gpu};
    ASSERT_TRUE(cpu_.rope(x.cpu, c.heads, positions.cpu, cp).ok());
    ASSERT_TRUE(gpu_->rope(x.gpu, c.heads, positions.gpu, gp).ok());
    expect_close(x, 1e-5, "rope layout " + std::to_string(static_cast<int>(c.layout)) + " rot " +
                              std::to_string(c.rot_dim) + "/" + std::to_string(c.head_dim));
  }
}

// The KV cache filled through kv_write on both backends, then attention for decode rows and prompt batches.
// rope_kv_write (rope of q and k and the KV write in one kernel) against the CPU backend's three ops, and bit for
// bit against the CUDA backend's own three ops: both layouts, partial rotation (the k elements past rot_dim go to
// the cache unrotated), a slot outside the cache skipped, one kernel under SIMT.
TEST_F(CudaOps, RopeKvWriteIsRopeRopeAndKvWriteInOneKernel) {
  struct Case {
    RopeLayout layout;
    int heads, kv_heads, head_dim, rot_dim;
  };
  for (const Case& c : {Case{RopeLayout::kHalfSplit, 8, 2, 64, 64}, Case{RopeLayout::kInterleaved, 4, 4, 80, 40}}) {
    const std::string what = "rope_kv_write layout " + std::to_string(static_cast<int>(c.layout)) + " rot " +
                             std::to_string(c.rot_dim) + "/" + std::to_string(c.head_dim);
    const int64_t tokens = 3, capacity = 6;
    const int64_t q_dim = int64_t{c.heads} * c.head_dim, kv_dim = int64_t{c.kv_heads} * c.head_dim;
    std::vector<float> inv(static_cast<size_t>(c.rot_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / c.rot_dim));
    const auto inv_freq = input_values(inv, c.rot_dim / 2, 1);
    const RopeParams cp{c.layout, c.head_dim, c.rot_dim, 1.0f, inv_freq.cpu};
    const RopeParams gp{c.layout, c.head_dim, c.rot_dim, 1.0f, inv_freq.gpu};
    const auto positions = input_values(std::vector<int32_t>{4097, 12, 30001}, tokens, 1);
    // Token 2 goes nowhere on the GPU (slot -1 is skipped there; the CPU backend would refuse it, so it gets 5).
    const auto slots = input_values(std::vector<int32_t>{3, 0, -1}, tokens, 1);
    const auto cpu_slots = input_values(std::vector<int32_t>{3, 0, 5}, tokens, 1);
    const auto q = input(tokens, q_dim, 500), k = input(tokens, kv_dim, 501), v = input(tokens, kv_dim, 502);
    const auto kc = input(capacity, kv_dim, 503), vc = input(capacity, kv_dim, 504);
    const auto cache_pos = input_values(std::vector<int32_t>(static_cast<size_t>(capacity), 7), capacity, 1);
    // Copies for the unfused CUDA run.
    const auto q2 = input_values(gpu_values(q.gpu), tokens, q_dim);
    const auto k2 = input_values(gpu_values(k.gpu), tokens, kv_dim);
    const auto kc2 = input_values(gpu_values(kc.gpu), capacity, kv_dim);
    const auto vc2 = input_values(gpu_values(vc.gpu), capacity, kv_dim);
    const auto cache_pos2 = input_values(gpu_values(cache_pos.gpu), capacity, 1);
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, cache_pos.cpu, {}}, gpu_cache{kc.gpu, vc.gpu, cache_pos.gpu, {}};
    const KvLayerView gpu_cache2{kc2.gpu, vc2.gpu, cache_pos2.gpu, {}};
    ASSERT_TRUE(cpu_.rope_kv_write(q.cpu, k.cpu, v.cpu, c.heads, c.kv_heads, positions.cpu, cp, cpu_cache,
                                   cpu_slots.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters start = simt::device_counters(0);
#endif
    const Status s =
        gpu_->rope_kv_write(q.gpu, k.gpu, v.gpu, c.heads, c.kv_heads, positions.gpu, gp, gpu_cache, slots.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, 1u) << what;
#endif
    expect_close(q, 1e-5, what + ": q");
    expect_close(k, 1e-5, what + ": k");
    // The cache rows of tokens 0 and 1 (slots 3 and 0) match the CPU's; slot 5 kept its old values on the GPU.
    const auto cpu_k = cpu_values(kc.cpu), gpu_k = gpu_values(kc.gpu), gpu_v = gpu_values(vc.gpu);
    const auto cpu_v = cpu_values(vc.cpu), old_k = gpu_values(kc2.gpu);
    for (int64_t slot : {int64_t{3}, int64_t{0}}) {
      const size_t at = static_cast<size_t>(slot * kv_dim);
      EXPECT_LT(test::relative_l2(gpu_k.data() + at, cpu_k.data() + at, static_cast<size_t>(kv_dim)), 1e-5) << what;
      EXPECT_TRUE(std::equal(gpu_v.begin() + at, gpu_v.begin() + at + kv_dim, cpu_v.begin() + at)) << what;
    }
    EXPECT_TRUE(std::equal(gpu_k.begin() + 5 * kv_dim, gpu_k.end(), old_k.begin() + 5 * kv_dim)) << what << ": slot -1";
    const auto gpu_pos = gpu_values(cache_pos.gpu);
    EXPECT_EQ(gpu_pos, (std::vector<int32_t>{12, 7, 7, 4097, 7, 7})) << what;

    const auto slots2 = input_values(gpu_values(slots.gpu), tokens, 1);
    ASSERT_TRUE(gpu_->rope(q2.gpu, c.heads, positions.gpu, gp).ok());
    ASSERT_TRUE(gpu_->rope(k2.gpu, c.kv_heads, positions.gpu, gp).ok());
    ASSERT_TRUE(gpu_->kv_write(gpu_cache2, slots2.gpu, positions.gpu, k2.gpu, v.gpu).ok());
    EXPECT_EQ(gpu_values(q.gpu), gpu_values(q2.gpu)) << what << ": fused q differs from rope";
    EXPECT_EQ(gpu_values(kc.gpu), gpu_values(kc2.gpu)) << what << ": fused cache k differs from rope + kv_write";
    EXPECT_EQ(gpu_values(vc.gpu), gpu_values(vc2.gpu)) << what;
    EXPECT_EQ(gpu_values(cache_pos.gpu), gpu_values(cache_pos2.gpu)) << what;
  }
}

TEST_F(CudaOps, AttentionGqaSlidingWindowDecodeAndPrompt) {
  struct Case {
    int heads, kv_heads, head_dim, window;
    int64_t cached, tokens;  // keys already in the cache, new query rows (appended after them)
  };
  for (const Case& c : {Case{8, 8, 64, 0, 69, 1}, Case{8, 2, 128, 0, 40, 1}, Case{4, 1, 80, 0, 0, 13},
                        Case{8, 2, 64, 5, 30, 7}, Case{6, 3, 256, 17, 100, 1}, Case{4, 2, 32, 0, 31, 33}}) {
    const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " hd " +
                             std::to_string(c.head_dim) + " window " + std::to_string(c.window) + " cached " +
                             std::to_string(c.cached) + " tokens " + std::to_string(c.tokens);
    const int64_t capacity = c.cached + c.tokens + 3;  // slack slots stay outside [0, keys)
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
    auto kc = output(capacity, kv_dim), vc = output(capacity, kv_dim);
    std::vector<int32_t> pos(static_cast<size_t>(capacity));
    for (int64_t i = 0; i < capacity; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const auto positions = input_values(pos, capacity, 1);
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, positions.cpu, {}};
    const KvLayerView gpu_cache{kc.gpu, vc.gpu, positions.gpu, {}};
    // Fill slots [0, keys) in reverse row order (kv_write scatters by slot), leaving the slack unwritten:
    // attention must not read past `keys`.
    const int64_t keys = c.cached + c.tokens;
    const auto k_all = input(keys, kv_dim, 400 + c.head_dim), v_all = input(keys, kv_dim, 500 + c.head_dim);
    std::vector<int32_t> reversed(static_cast<size_t>(keys));
    for (int64_t r = 0; r < keys; ++r) reversed[static_cast<size_t>(r)] = static_cast<int32_t>(keys - 1 - r);
    const auto slots = input_values(reversed, keys, 1);  // the position of slot s is s again
    if (keys > 0) {
      ASSERT_TRUE(cpu_.kv_write(cpu_cache, slots.cpu, slots.cpu, k_all.cpu, v_all.cpu).ok());
      ASSERT_TRUE(gpu_->kv_write(gpu_cache, slots.gpu, slots.gpu, k_all.gpu, v_all.gpu).ok());
    }
    EXPECT_EQ(gpu_values(kc.gpu.row_range(0, keys)), cpu_values(kc.cpu.row_range(0, keys))) << what;
    EXPECT_EQ(gpu_values(vc.gpu.row_range(0, keys)), cpu_values(vc.cpu.row_range(0, keys))) << what;
    EXPECT_EQ(gpu_values(positions.gpu), cpu_values(positions.cpu)) << what;
    if (keys > 0) {
      const std::vector<float> row0 = gpu_values(k_all.gpu.row_range(0, 1));
      EXPECT_EQ(gpu_values(kc.gpu.row_range(keys - 1, 1)), row0) << "row 0 lands in the last slot, " << what;
    }
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);

    const auto q = input(c.tokens, q_dim, 600 + c.tokens);
    const auto out = output(c.tokens, q_dim);
    const AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                            c.window};
    const ConstI32View cpu_q_pos = positions.cpu.row_range(c.cached, c.tokens);
    const ConstI32View gpu_q_pos = positions.gpu.row_range(c.cached, c.tokens);
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q_pos, cpu_cache, key_count.cpu, p, out.cpu).ok());
    Status s = gpu_->attention(q.gpu, gpu_q_pos, gpu_cache, key_count.gpu, p, out.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_close(out, 1e-5, "attention " + what);
  }
}

TEST_F(CudaOps, AttentionWithNoVisibleKeyGivesZeros) {
  const int heads = 2, kv_heads = 1, hd = 32;
  const int64_t keys = 40;
  auto kc = input(keys, kv_heads * hd, 1), vc = input(keys, kv_heads * hd, 2);
  std::vector<int32_t> pos(keys);
  for (int64_t i = 0; i < keys; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(100 + i);
  const auto positions = input_values(pos, keys, 1);
  // Query 0 precedes every key; query 1 sees keys 100..105 only through a window of 6 at position 105.
  const auto q_pos = input_values(std::vector<int32_t>{50, 105}, 2, 1);
  const auto q = input(2, heads * hd, 3);
  const auto out = output(2, heads * hd);
  const AttentionParams p{heads, kv_heads, hd, 0.2f, 6};
  const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
  const KvLayerView cpu_cache{kc.cpu, vc.cpu, positions.cpu, {}}, gpu_cache{kc.gpu, vc.gpu, positions.gpu, {}};
  ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, cpu_cache, key_count.cpu, p, out.cpu).ok());
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, key_count.gpu, p, out.gpu).ok());
  const auto got = gpu_values(out.gpu);
  for (int i = 0; i < heads * hd; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 0.0f) << i;
  expect_close(out, 1e-5, "attention masked");
}

// Slots of [0, keys) that a query cannot see may hold anything, NaN included (a slot reserved for a later token and
// not written yet): they must contribute nothing, as the CPU reference skips them. Every other slot is visible.
TEST_F(CudaOps, AttentionIgnoresInvisibleSlotsEvenWhenTheyHoldNaN) {
  const int heads = 4, kv_heads = 2, hd = 64;
  const int64_t keys = 70, kv_dim = int64_t{kv_heads} * hd;
  std::vector<float> k = test::random_normal(static_cast<size_t>(keys * kv_dim), 31);
  std::vector<float> v = test::random_normal(static_cast<size_t>(keys * kv_dim), 32);
  std::vector<int32_t> pos(static_cast<size_t>(keys));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t j = 0; j < keys; ++j) {
    // Every fifth slot is a future position (never visible here) whose rows were never written.
    const bool future = j % 5 == 3;
    pos[static_cast<size_t>(j)] = static_cast<int32_t>(future ? 1000 + j : j);
    if (future)
      for (int64_t d = 0; d < kv_dim; ++d) k[static_cast<size_t>(j * kv_dim + d)] = v[static_cast<size_t>(j * kv_dim + d)] = nan;
  }
  const auto kc = input_values(k, keys, kv_dim), vc = input_values(v, keys, kv_dim);
  const auto positions = input_values(pos, keys, 1);
  const auto q_pos = input_values(std::vector<int32_t>{69, 40, 3}, 3, 1);
  const auto q = input(3, int64_t{heads} * hd, 33);
  const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
  for (int window : {0, 9}) {
    const auto out = output(3, int64_t{heads} * hd);
    const AttentionParams p{heads, kv_heads, hd, 0.125f, window};
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, positions.cpu, {}}, gpu_cache{kc.gpu, vc.gpu, positions.gpu, {}};
    ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, cpu_cache, key_count.cpu, p, out.cpu).ok());
    ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, key_count.gpu, p, out.gpu).ok());
    expect_close(out, 1e-5, "attention with NaN in invisible slots, window " + std::to_string(window));
  }
}

// The slots and the key count are read by the device when the op runs (a replayed graph sees new values): a count
// above the capacity is clamped, a negative one gives zeros, and a slot outside the cache is skipped, not written
// (under the SIMT layer a write past the allocation would fault).
TEST_F(CudaOps, KvWriteAndAttentionReadTheirCountsFromTheDevice) {
  const int heads = 4, kv_heads = 2, hd = 32;
  const int64_t capacity = 9, kv_dim = int64_t{kv_heads} * hd;
  const auto kc = input(capacity, kv_dim, 41), vc = input(capacity, kv_dim, 42);
  std::vector<int32_t> pos(static_cast<size_t>(capacity));
  for (int64_t i = 0; i < capacity; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const auto positions = input_values(pos, capacity, 1);
  const KvLayerView gpu_cache{kc.gpu, vc.gpu, positions.gpu, {}};
  const std::vector<float> k_before = gpu_values(kc.gpu);
  const auto rows = input(2, kv_dim, 43);
  const auto bad_slots = input_values(std::vector<int32_t>{static_cast<int32_t>(capacity), -1}, 2, 1);
  ASSERT_TRUE(gpu_->kv_write(gpu_cache, bad_slots.gpu, bad_slots.gpu, rows.gpu, rows.gpu).ok());
  EXPECT_EQ(gpu_values(kc.gpu), k_before) << "slots outside the cache are skipped";

  const auto q = input(1, int64_t{heads} * hd, 44);
  const auto q_pos = input_values(std::vector<int32_t>{100}, 1, 1);
  const AttentionParams p{heads, kv_heads, hd, 0.2f, 0};
  const auto all = input_values(std::vector<int32_t>{static_cast<int32_t>(capacity)}, 1, 1);
  const auto out_all = output(1, int64_t{heads} * hd);
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, all.gpu, p, out_all.gpu).ok());
  const auto too_many = input_values(std::vector<int32_t>{1000}, 1, 1);
  const auto out_clamped = output(1, int64_t{heads} * hd);
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, too_many.gpu, p, out_clamped.gpu).ok());
  EXPECT_EQ(gpu_values(out_clamped.gpu), gpu_values(out_all.gpu)) << "a count above the capacity is clamped";
  const auto negative = input_values(std::vector<int32_t>{-5}, 1, 1);
  const auto out_none = output(1, int64_t{heads} * hd);
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, negative.gpu, p, out_none.gpu).ok());
  for (float x : gpu_values(out_none.gpu)) EXPECT_EQ(x, 0.0f);
  // The count is read at run time: the same op with the value changed in place sees the new count.
  const auto count = input_values(std::vector<int32_t>{3}, 1, 1);
  const auto out_three = output(1, int64_t{heads} * hd);
  ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, KvLayerView{kc.cpu, vc.cpu, positions.cpu, {}}, count.cpu, p,
                             out_three.cpu).ok());
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, gpu_cache, count.gpu, p, out_three.gpu).ok());
  expect_close(out_three, 1e-5, "attention over 3 of 9 slots");
}

// Decode attention split over the sequence (a workspace from attention_workspace_bytes, as a sequence allocates it
// for one-token steps) against the CPU reference: lengths around the split and warp boundaries and beyond the
// shared-memory chunk, GQA groups of 1, 4, 8 and 3 (a 4-head kernel with one idle), head dims 32 to 256 (two
// 4-element pieces per lane above 128; 80 leaves lanes and threads idle), a sliding window, several query rows,
// slots that are invisible and hold NaN, and a cache much larger than the key count (splits with no keys).
TEST_F(CudaOps, SplitAttentionMatchesCpu) {
  struct Case {
    int heads, kv_heads, head_dim, window;
    int64_t tokens, keys, capacity;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : {Case{8, 8, 64, 0, 1, 1, 8}, Case{32, 8, 128, 0, 1, 31, 64}, Case{32, 8, 128, 0, 1, 32, 32},
                        Case{32, 8, 128, 0, 1, 33, 4096}, Case{32, 4, 128, 0, 1, 4097, 4097},
                        Case{16, 2, 64, 7, 1, 300, 512}, Case{8, 8, 32, 0, 3, 100, 100},
                        Case{12, 1, 96, 0, 2, 1000, 20000}, Case{8, 2, 256, 0, 1, 700, 1024},
                        Case{16, 4, 80, 0, 2, 200, 256}, Case{24, 3, 128, 0, 1, 90, 96}}) {
    const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " hd " +
                             std::to_string(c.head_dim) + " window " + std::to_string(c.window) + " tokens " +
                             std::to_string(c.tokens) + " keys " + std::to_string(c.keys) + " of " +
                             std::to_string(c.capacity);
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
    std::vector<float> k = test::random_normal(static_cast<size_t>(c.capacity * kv_dim), 70 + c.keys);
    std::vector<float> v = test::random_normal(static_cast<size_t>(c.capacity * kv_dim), 80 + c.keys);
    std::vector<int32_t> pos(static_cast<size_t>(c.capacity));
    for (int64_t j = 0; j < c.capacity; ++j) {
      // Every seventh slot belongs to a later token, not written yet: invisible, NaN.
      const bool future = j % 7 == 5;
      pos[static_cast<size_t>(j)] = static_cast<int32_t>(future ? 100000 + j : j);
      if (future || j >= c.keys)
        for (int64_t d = 0; d < kv_dim; ++d)
          k[static_cast<size_t>(j * kv_dim + d)] = v[static_cast<size_t>(j * kv_dim + d)] = nan;
    }
    const auto kc = input_values(k, c.capacity, kv_dim), vc = input_values(v, c.capacity, kv_dim);
    const auto positions = input_values(pos, c.capacity, 1);
    std::vector<int32_t> qp;
    for (int64_t t = 0; t < c.tokens; ++t) qp.push_back(static_cast<int32_t>(c.keys - 1 - t * 3));
    const auto q_pos = input_values(qp, c.tokens, 1);
    const auto q = input(c.tokens, q_dim, 90 + c.keys);
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    const AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                            c.window};
    const uint64_t bytes = gpu_->attention_workspace_bytes(c.tokens, p, c.capacity);
    ASSERT_GT(bytes, 0u) << what;
    auto workspace = allocate_scoped(*gpu_, bytes);
    ASSERT_TRUE(workspace.ok());
    const auto out = output(c.tokens, q_dim);
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, positions.cpu, {}};
    ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, cpu_cache, key_count.cpu, p, out.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->attention(q.gpu, q_pos.gpu, KvLayerView{kc.gpu, vc.gpu, positions.gpu, workspace->buffer()},
                                     key_count.gpu, p, out.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "split and merge kernels, " << what;
#endif
    expect_close(out, 1e-5, "split attention " + what);
  }
}

// The split kernel reads 4 elements of a row at once: a head_dim that is not a multiple of 4 gets no split plan, and
// a cache array not aligned to 4 of its elements (an f32 view 2 elements into its buffer) is read by the per-head
// kernel; both match the CPU. The kernel itself refuses such arrays.
TEST_F(CudaOps, SplitAttentionNeedsFourElementPieces) {
  const AttentionParams odd{4, 2, 6, 0.4f, 0};
  EXPECT_EQ(gpu_->attention_workspace_bytes(1, odd, 64), 0u) << "head_dim 6";
  const int heads = 8, kv_heads = 2, hd = 64;
  const int64_t keys = 70, capacity = 80, kv_dim = int64_t{kv_heads} * hd;
  const AttentionParams p{heads, kv_heads, hd, 0.125f, 0};
  std::vector<float> k = test::random_normal(static_cast<size_t>(capacity * kv_dim + 2), 950);
  std::vector<float> v = test::random_normal(static_cast<size_t>(capacity * kv_dim + 2), 951);
  std::vector<int32_t> pos(static_cast<size_t>(capacity));
  for (int64_t j = 0; j < capacity; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  const auto kb = input_values(k, 1, capacity * kv_dim + 2), vb = input_values(v, 1, capacity * kv_dim + 2);
  const auto at2 = [&](F32View b) { return KvView(F32View{b.data + 2, capacity, kv_dim}); };
  const auto positions = input_values(pos, capacity, 1);
  const auto q_pos = input_values(std::vector<int32_t>{static_cast<int32_t>(keys - 1)}, 1, 1);
  const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
  const auto q = input(1, int64_t{heads} * hd, 952);
  const auto out = output(1, int64_t{heads} * hd);
  auto workspace = allocate_scoped(*gpu_, gpu_->attention_workspace_bytes(1, p, capacity));
  ASSERT_TRUE(workspace.ok());
  ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, KvLayerView{at2(kb.cpu), at2(vb.cpu), positions.cpu, {}},
                             key_count.cpu, p, out.cpu)
                  .ok());
#if defined(QRT_SIMT)
  const simt::StreamCounters before = simt::device_counters(0);
#endif
  const KvLayerView misaligned{at2(kb.gpu), at2(vb.gpu), positions.gpu, workspace->buffer()};
  ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, misaligned, key_count.gpu, p, out.gpu).ok());
#if defined(QRT_SIMT)
  EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 1u) << "the per-head kernel, not split and merge";
#endif
  expect_close(out, 1e-5, "attention over a cache 8 bytes past 16-byte alignment");
  EXPECT_FALSE(kernels::attention_split_aligned(kb.gpu.data + 2, vb.gpu.data, KvType::kF32));
  EXPECT_TRUE(kernels::attention_split_aligned(kb.gpu.data + 4, vb.gpu.data, KvType::kF32));
  EXPECT_FALSE(kernels::attention_split_aligned(kb.gpu.data, reinterpret_cast<uint8_t*>(vb.gpu.data) + 4,
                                                KvType::kF16));
  EXPECT_TRUE(kernels::attention_split_aligned(reinterpret_cast<uint8_t*>(kb.gpu.data) + 2,
                                               reinterpret_cast<uint8_t*>(vb.gpu.data) + 6, KvType::kQ8_0));
}

// The rows whose logits a pass wants, gathered before the output head: repeats and any order, bit for bit the CPU's;
// the CPU reports a row outside x.
TEST_F(CudaOps, GatherRowsCopiesTheNamedRows) {
  const auto x = input(7, 33, 501);
  const auto rows = input_values(std::vector<int32_t>{6, 0, 3, 3}, 4, 1);
  const auto out = output(4, 33);
  ASSERT_TRUE(cpu_.gather_rows(x.cpu, rows.cpu, out.cpu).ok());
  const Status s = gpu_->gather_rows(x.gpu, rows.gpu, out.gpu);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(gpu_values(out.gpu), cpu_values(out.cpu));
  const std::vector<float> xs = cpu_values(x.cpu), got = cpu_values(out.cpu);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 33, xs.begin() + 6 * 33)) << "row 0 is x's row 6";
  const auto bad = input_values(std::vector<int32_t>{7}, 1, 1);
  EXPECT_EQ(cpu_.gather_rows(x.cpu, bad.cpu, out.cpu.row_range(0, 1)).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(cpu_.gather_rows(x.cpu, rows.cpu, out.cpu.row_range(0, 3)).code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaOps, SiluMulAndAddIncludingAliasedOutputs) {
  for (int64_t cols : {int64_t{1}, int64_t{333}, int64_t{4096}}) {
    const auto gate = input(7, cols, 700 + cols, 3.0f), up = input(7, cols, 800 + cols);
    const auto out = output(7, cols);
    ASSERT_TRUE(cpu_.silu_mul(gate.cpu, up.cpu, out.cpu).ok());
    ASSERT_TRUE(gpu_->silu_mul(gate.gpu, up.gpu, out.gpu).ok());
    expect_close(out, 1e-5, "silu_mul " + std::to_string(cols));
    ASSERT_TRUE(cpu_.silu_mul(gate.cpu, up.cpu, gate.cpu).ok());  // out = gate, as the transformer calls it
    ASSERT_TRUE(gpu_->silu_mul(gate.gpu, up.gpu, gate.gpu).ok());
    expect_close(gate, 1e-5, "silu_mul in place " + std::to_string(cols));

    const auto a = input(7, cols, 900 + cols), b = input(7, cols, 1000 + cols);
    const auto sum = output(7, cols);
    ASSERT_TRUE(cpu_.add(a.cpu, b.cpu, sum.cpu).ok());
    ASSERT_TRUE(gpu_->add(a.gpu, b.gpu, sum.gpu).ok());
    EXPECT_EQ(gpu_values(sum.gpu), cpu_values(sum.cpu)) << "fp32 a + b is exact on both";
    ASSERT_TRUE(cpu_.add(a.cpu, b.cpu, a.cpu).ok());  // the residual add: out = a
    ASSERT_TRUE(gpu_->add(a.gpu, b.gpu, a.gpu).ok());
    EXPECT_EQ(gpu_values(a.gpu), cpu_values(a.cpu));
  }
}

TEST_F(CudaOps, MoeRouteTopKTiesAndRenormalization) {
  struct Case {
    int64_t tokens;
    int experts, top_k;
    bool renormalize, ties;
  };
  for (const Case& c : {Case{5, 8, 2, true, false}, Case{5, 8, 2, false, false}, Case{3, 64, 8, true, false},
                        Case{4, 130, 4, true, false}, Case{6, 16, 4, true, true}, Case{6, 16, 16, false, true},
                        Case{2, 1024, 8, true, false}}) {
    std::vector<float> logits = test::random_normal(static_cast<size_t>(c.tokens * c.experts), 1100 + c.experts, 2.0f);
    // Ties: only four distinct values, so many experts share a probability and the lower id must win.
    if (c.ties)
      for (float& v : logits) v = std::round(v * 0.75f);
    const auto l = input_values(logits, c.tokens, c.experts);
    auto ids = alloc<int32_t>(c.tokens, c.top_k);
    const auto w = output(c.tokens, c.top_k);
    ASSERT_TRUE(cpu_.moe_route(l.cpu, c.renormalize, ids.cpu, w.cpu).ok());
    ASSERT_TRUE(gpu_->moe_route(l.gpu, c.renormalize, ids.gpu, w.gpu).ok());
    const std::string what = "experts " + std::to_string(c.experts) + " top_k " + std::to_string(c.top_k) +
                             (c.renormalize ? " renormalized" : "") + (c.ties ? " ties" : "");
    EXPECT_EQ(gpu_values(ids.gpu), cpu_values(ids.cpu)) << what;
    expect_close(w, 1e-6, "moe_route weights " + what);
  }
}

TEST_F(CudaOps, MoeCombine) {
  for (int top_k : {1, 2, 8}) {
    const int64_t tokens = 5, dim = 300;
    const auto y = input(tokens * top_k, dim, 1200 + top_k);
    const auto w = input(tokens, top_k, 1300 + top_k, 0.5f);
    const auto out = output(tokens, dim);
    ASSERT_TRUE(cpu_.moe_combine(y.cpu, w.cpu, out.cpu).ok());
    ASSERT_TRUE(gpu_->moe_combine(y.gpu, w.gpu, out.gpu).ok());
    expect_close(out, 1e-6, "moe_combine top_k " + std::to_string(top_k));
  }
}

// Any format: the GPU decodes rows through the same traits as the CPU (fp32 contraction may differ by an ulp).
class CudaEmbed : public BackendPair, public testing::WithParamInterface<quant::FormatId> {};

TEST_P(CudaEmbed, MatchesCpuForEveryFormat) {
  const quant::FormatId format = GetParam();
  const int64_t vocab = 37, dim = 512;
  const auto values = test::random_normal(static_cast<size_t>(vocab * dim), 1400);
  auto table = test::quantized_tensor(format, {vocab, dim}, values, test::default_params(format));
  const auto w = weight(table->tensor);
  ASSERT_TRUE(w.gpu.valid());
  const auto tokens = input_values(std::vector<int32_t>{0, 36, 5, 5, 17, 36, 1}, 7, 1);
  const auto out = output(7, dim);
  ASSERT_TRUE(cpu_.embed(w.cpu, tokens.cpu, out.cpu).ok());
  ASSERT_TRUE(gpu_->embed(w.gpu, tokens.gpu, out.gpu).ok());
  expect_close(out, 1e-6, "embed " + std::string(quant::format_name(format)));
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaEmbed, testing::ValuesIn(quant::kAllFormats), test::format_test_name);

TEST_F(CudaOps, ArgmaxLowestIndexAmongEqualMaxima) {
  const int64_t rows = 8, vocab = 32000;
  auto values = test::random_normal(static_cast<size_t>(rows * vocab), 1500);
  values[1 * vocab + 7] = 50.0f;  // a planted maximum, twice: the lower index wins
  values[1 * vocab + 31000] = 50.0f;
  values[2 * vocab + vocab - 1] = 60.0f;  // at the very end
  values[3 * vocab + 100] = std::numeric_limits<float>::quiet_NaN();  // NaN never wins
  values[3 * vocab + 200] = 70.0f;
  for (int64_t i = 0; i < vocab; ++i) values[4 * vocab + i] = std::numeric_limits<float>::quiet_NaN();  // gives 0
  // Ties met in each step of a 1024-thread block with 4 loads in flight: a later load of the same thread (5 + 1024),
  // another lane (6), another warp (5 + 64), the thread's next round (5 + 4096): the lowest index, 5, wins.
  for (int64_t i : {5 + 1024, 6, 5 + 64, 5 + 4096, 5}) values[5 * vocab + i] = 80.0f;
  for (int64_t i : {vocab - 2, int64_t{9000}, int64_t{31999 - 1024}}) values[6 * vocab + i] = 90.0f;
  const auto logits = input_values(values, rows, vocab);
  auto ids = alloc<int32_t>(rows, 1);
  ASSERT_TRUE(gpu_->argmax(logits.gpu, ids.gpu).ok());
  const auto got = gpu_values(ids.gpu);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * vocab;
    int32_t want = -1;  // the first maximum among the numbers; 0 when there is none
    for (int32_t i = 0; i < vocab; ++i)
      if (!std::isnan(row[i]) && (want < 0 || row[i] > row[want])) want = i;
    if (want < 0) want = 0;
    EXPECT_EQ(got[static_cast<size_t>(r)], want) << "row " << r;
  }
  EXPECT_EQ(got[1], 7);
  EXPECT_EQ(got[2], vocab - 1);
  EXPECT_EQ(got[3], 200);
  EXPECT_EQ(got[4], 0);
  EXPECT_EQ(got[5], 5);
  EXPECT_EQ(got[6], 9000);
}

}  // namespace
}  // namespace qrt
