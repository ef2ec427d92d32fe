// The ops DeepSeek's models add, on the CUDA backend against the CPU reference: the grouped router (softmax or
// sigmoid scores, groups by their best or two best, a choice bias, renormalization and scale), rows side by side
// (concat_cols), the latent cache whose values are its keys (the writes store k once), and attention at
// DeepSeek-V2-Lite's latent shape (16 query heads on one 576-wide KV row) through the latent decode kernel (on the
// tensor cores for 16-bit caches, in fp32 for the others) and the per-head kernel.
#include <cmath>
#include <limits>
#include <string>

#include "backend_pair.hpp"
#include "kernels/attention/attention_latent.hpp"
#include "kernels/attention/attention_latent_mma.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

class DeepseekOps : public test::BackendPair {};

TEST_F(DeepseekOps, GroupedRouterChoosesAndWeighsAsTheCpu) {
  struct Case {
    int64_t tokens;
    int experts, top_k, groups, groups_used;
    bool sigmoid, top2, bias, renormalize;
    float scale;
    bool limit_shows;  // these rows choose differently without the group limit
  };
  const Case cases[] = {
      {5, 8, 2, 1, 1, false, false, false, false, 1.5f, false},  // V2-Lite: plain top-k, scaled
      {6, 64, 6, 8, 3, false, false, false, false, 16.0f, true},  // V2: groups by their best
      {7, 256, 8, 8, 4, true, true, true, true, 2.5f, true},      // V3
      {3, 32, 4, 4, 2, true, true, false, true, 1.0f, false},
      {2, 512, 8, 64, 8, true, false, true, false, 1.0f, false},  // the kernel's limits
  };
  for (const Case& c : cases) {
    std::vector<float> logits = test::random_normal(static_cast<size_t>(c.tokens * c.experts), 900 + c.experts, 2.0f);
    logits[3] = std::numeric_limits<float>::quiet_NaN();  // never chosen (sigmoid), or a whole NaN row (softmax)
    const auto l = input_values(logits, c.tokens, c.experts);
    const auto bias = input(1, c.experts, 950 + c.experts, 0.1f);
    MoeRouting cpu_routing{c.sigmoid, nullptr, c.groups, c.groups_used, c.top2, c.renormalize, c.scale};
    MoeRouting gpu_routing = cpu_routing;
    if (c.bias) {
      cpu_routing.choice_bias = bias.cpu.data;
      gpu_routing.choice_bias = bias.gpu.data;
    }
    auto ids = alloc<int32_t>(c.tokens, c.top_k);
    const auto w = output(c.tokens, c.top_k);
    ASSERT_TRUE(cpu_.moe_route_grouped(l.cpu, cpu_routing, ids.cpu, w.cpu).ok());
    const Status s = gpu_->moe_route_grouped(l.gpu, gpu_routing, ids.gpu, w.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::string what = std::to_string(c.experts) + " experts, " + std::to_string(c.groups) + " groups";
    const std::vector<int32_t> want = cpu_values(ids.cpu);
    EXPECT_EQ(gpu_values(ids.gpu), want) << what;
    const std::vector<float> got_w = gpu_values(w.gpu), want_w = cpu_values(w.cpu);
    for (size_t i = 0; i < want_w.size(); ++i) {
      if (std::isnan(want_w[i])) {
        EXPECT_TRUE(std::isnan(got_w[i])) << what << " weight " << i;
      } else {
        EXPECT_NEAR(got_w[i], want_w[i], 1e-6 * std::fabs(want_w[i]) + 1e-7) << what << " weight " << i;
      }
    }
    // The group limit matters: with every group taking part the choice differs somewhere.
    if (c.limit_shows) {
      MoeRouting open = cpu_routing;
      open.groups = open.groups_used = 1;
      auto open_ids = alloc<int32_t>(c.tokens, c.top_k);
      const auto open_w = output(c.tokens, c.top_k);
      ASSERT_TRUE(cpu_.moe_route_grouped(l.cpu, open, open_ids.cpu, open_w.cpu).ok());
      EXPECT_NE(cpu_values(open_ids.cpu), want) << what;
    }
  }
  // Groups that cannot supply top_k experts are refused.
  const auto l = input(2, 8, 7);
  auto ids = alloc<int32_t>(2, 4);
  const auto w = output(2, 4);
  EXPECT_EQ(gpu_->moe_route_grouped(l.gpu, MoeRouting{false, nullptr, 4, 1}, ids.gpu, w.gpu).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu_->moe_route_grouped(l.gpu, MoeRouting{false, nullptr, 3, 3}, ids.gpu, w.gpu).code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(DeepseekOps, ConcatColsPutsRowsSideBySide) {
  const auto a = input(5, 64, 11), b = input(5, 512, 12);
  const auto out = output(5, 576);
  ASSERT_TRUE(cpu_.concat_cols(a.cpu, b.cpu, out.cpu).ok());
  ASSERT_TRUE(gpu_->concat_cols(a.gpu, b.gpu, out.gpu).ok());
  EXPECT_EQ(gpu_values(out.gpu), cpu_values(out.cpu));
  const std::vector<float> got = cpu_values(out.cpu), av = cpu_values(a.cpu), bv = cpu_values(b.cpu);
  EXPECT_EQ(got[576 * 2 + 63], av[64 * 2 + 63]);
  EXPECT_EQ(got[576 * 2 + 64], bv[512 * 2]);
  EXPECT_EQ(gpu_->concat_cols(a.gpu, b.gpu, output(5, 575).gpu).code(), ErrorCode::kInvalidArgument);
}

// The latent cache: one row of [RoPE key | latent] per token, v the same array as k. rope_kv_write rotates the first
// 64 dims of each query head and of the key and stores the key once; a separate value write would overwrite the
// rotated dims with the unrotated ones.
TEST_F(DeepseekOps, LatentCacheStoresTheRotatedKeyOnce) {
  const int heads = 4, row = 576, rot = 64;
  const int64_t tokens = 3, capacity = 5;
  std::vector<float> inv(rot / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rot));
  const auto inv_freq = input_values(inv, rot / 2, 1);
  const RopeParams cp{RopeLayout::kInterleaved, row, rot, 1.0f, inv_freq.cpu};
  const RopeParams gp{RopeLayout::kInterleaved, row, rot, 1.0f, inv_freq.gpu};
  const auto positions = input_values(std::vector<int32_t>{3, 4, 5}, tokens, 1);
  const auto slots = input_values(std::vector<int32_t>{1, 2, 4}, tokens, 1);
  const auto q = input(tokens, heads * row, 21), key = input(tokens, row, 22);
  const auto unrotated = cpu_values(key.cpu);
  const auto cache = input_values(std::vector<float>(static_cast<size_t>(capacity * row), 0.0f), capacity, row);
  const auto cache_pos = input_values(std::vector<int32_t>(capacity, -1), capacity, 1);
  const KvLayerView cpu_cache{KvView(cache.cpu), KvView(cache.cpu), cache_pos.cpu, {}};
  const KvLayerView gpu_cache{KvView(cache.gpu), KvView(cache.gpu), cache_pos.gpu, {}};
  ASSERT_TRUE(cpu_.rope_kv_write(q.cpu, key.cpu, key.cpu, heads, 1, positions.cpu, cp, cpu_cache, slots.cpu).ok());
  const Status s = gpu_->rope_kv_write(q.gpu, key.gpu, key.gpu, heads, 1, positions.gpu, gp, gpu_cache, slots.gpu);
  ASSERT_TRUE(s.ok()) << s.to_string();
  expect_close(q, 1e-6, "rotated queries");
  expect_close(key, 1e-6, "rotated key");
  const std::vector<float> got = gpu_values(cache.gpu), rotated = cpu_values(key.cpu);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = cpu_values(slots.cpu)[static_cast<size_t>(t)];
    for (int i = 0; i < row; ++i) {
      const size_t at = static_cast<size_t>(slot * row + i), from = static_cast<size_t>(t * row + i);
      ASSERT_NEAR(got[at], rotated[from], 1e-6) << "slot " << slot << " dim " << i;
      if (i == 0) {
        ASSERT_NE(rotated[from], unrotated[from]) << "position " << t + 3 << " must rotate dim 0";
      }
    }
  }
  EXPECT_EQ(gpu_values(cache_pos.gpu), (std::vector<int32_t>{-1, 3, 4, -1, 5}));
  // kv_write alone into the same kind of cache.
  const auto other = input(tokens, row, 23);
  ASSERT_TRUE(gpu_->kv_write(gpu_cache, slots.gpu, positions.gpu, other.gpu, other.gpu).ok());
  const std::vector<float> written = gpu_values(cache.gpu), source = gpu_values(other.gpu);
  EXPECT_EQ(written[static_cast<size_t>(4 * row + 7)], source[static_cast<size_t>(2 * row + 7)]);
}

// Attention over a latent cache: multi-query heads of width 576 whose values are the keys. Rows with a workspace
// take the latent kernel and its merge (blocks of 16 query heads: 16, 40 = 16 + 16 + 8); over an f16 or bf16 cache
// its tensor-core form, which rounds Q and P to the cache's type (hence the prompt kernels' bounds; measured under
// SIMT: 2.9e-4 for f16, 2.7e-3 for bf16). A prompt without a workspace: over a 16-bit cache one tensor-core split
// per row, normalized in the kernel (one launch; with attention sinks too), over an f32 cache the per-head kernel.
TEST_F(DeepseekOps, AttentionAtTheLatentShape) {
  struct Case {
    const char* kernel;
    int heads;
    KvType type;
    int64_t tokens, keys;
    bool workspace;
    uint64_t launches;
    double bound = 1e-5;
    bool sinks = false;
  };
  for (const Case& c : {Case{"latent decode, tensor cores", 16, KvType::kF16, 1, 70, true, 2, 1e-3},
                        Case{"per-head prompt", 16, KvType::kF32, 6, 40, false, 1},
                        Case{"latent decode, 40 heads, tensor cores", 40, KvType::kBF16, 1, 45, true, 2, 8e-3},
                        Case{"latent decode, q8_0, 300 keys", 16, KvType::kQ8_0, 1, 300, true, 2, 1e-4},
                        Case{"latent, 3 rows", 16, KvType::kF32, 3, 33, true, 2},
                        Case{"prompt rows, tensor cores", 16, KvType::kF16, 6, 40, false, 1, 1e-3},
                        Case{"prompt rows, 40 heads, sinks", 40, KvType::kF16, 5, 70, false, 1, 1e-3, true}}) {
    const int row = 576;
    const int64_t capacity = c.keys + 3;
    AttentionParams params{c.heads, 1, row, 0.08f};
    params.values_are_keys = true;
    const std::vector<float> k = test::random_normal(static_cast<size_t>(capacity * row), 40 + c.keys);
    const auto kd = input_values(test::kv_type_bits(c.type, k, k.size()), capacity, kv_row_bytes(c.type, row));
    const KvView kc{kd.cpu.data, capacity, row, c.type}, kg{kd.gpu.data, capacity, row, c.type};
    std::vector<int32_t> pos(static_cast<size_t>(capacity));
    for (int64_t j = 0; j < capacity; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    const auto positions = input_values(pos, capacity, 1);
    const auto q = input(c.tokens, c.heads * row, 41 + c.tokens);
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    const auto sinks = input(1, c.heads, 42);  // gpt-oss's logit per head, N(0, 1)
    AttentionParams cpu_params = params;
    if (c.sinks) {
      cpu_params.sinks = sinks.cpu.data;
      params.sinks = sinks.gpu.data;
    }
    ScopedBuffer workspace;
    if (c.workspace) {
      auto w = allocate_scoped(*gpu_, gpu_->attention_workspace_bytes(c.tokens, params, capacity));
      ASSERT_TRUE(w.ok());
      workspace = std::move(*w);
    }
    const KvLayerView cpu_cache{kc, kc, positions.cpu, {}}, gpu_cache{kg, kg, positions.gpu, workspace.buffer()};
    const ConstI32View cpu_q = positions.cpu.row_range(c.keys - c.tokens, c.tokens);
    const ConstI32View gpu_q = positions.gpu.row_range(c.keys - c.tokens, c.tokens);
    const auto out = output(c.tokens, c.heads * row);
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q, cpu_cache, key_count.cpu, cpu_params, out.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->attention(q.gpu, gpu_q, gpu_cache, key_count.gpu, params, out.gpu);
    ASSERT_TRUE(s.ok()) << c.kernel << ": " << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, c.launches) << c.kernel;
#endif
    expect_close(out, c.bound, c.kernel);
  }
}

// The tensor-core latent kernel over several key tiles in one split (the backend's plans give decode splits of up
// to 32 keys until the cache is long): a plan of one split over 150 keys, 5 tiles of 32 (the last partial), as 3
// rows at positions 100, 120 and 149 see them (later keys masked, whole tiles invisible to a row), against the CPU.
TEST_F(DeepseekOps, LatentTensorCoreKernelWalksSeveralKeyTiles) {
  const int heads = 16, row = 288;
  const int64_t keys = 150, tokens = 3;
  AttentionParams params{heads, 1, row, 0.1f};
  params.values_are_keys = true;
  const std::vector<float> k = test::random_normal(static_cast<size_t>(keys * row), 71);
  const auto kd = input_values(test::kv_type_bits(KvType::kF16, k, k.size()), keys, kv_row_bytes(KvType::kF16, row));
  const KvView kc{kd.cpu.data, keys, row, KvType::kF16};
  std::vector<int32_t> pos(static_cast<size_t>(keys));
  for (int64_t j = 0; j < keys; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  const auto positions = input_values(pos, keys, 1);
  const auto q_pos = input_values(std::vector<int32_t>{100, 120, 149}, tokens, 1);
  const auto q = input(tokens, heads * row, 72);
  const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
  const auto want = output(tokens, heads * row), out = output(tokens, heads * row);
  ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, KvLayerView{kc, kc, positions.cpu, {}}, key_count.cpu, params,
                             want.cpu)
                  .ok());
  kernels::AttentionShape shape{tokens, keys, heads, 1, row, params.scale, 0, KvType::kF16, {}};
  kernels::AttentionLatentPlan plan = kernels::plan_attention_latent(shape);
  ASSERT_GT(plan.splits, 0);
  plan.splits = 1;
  ASSERT_TRUE(kernels::attention_latent_mma_applies(shape, kd.gpu.data, UINT64_MAX));
  const auto workspace = output(tokens * heads, 2 + row);  // max, sum and the output per (row, head, one split)
  // The kernels run on the default stream here: the uploads (and the outputs' NaN) on the backend's land first.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Status s = kernels::attention_latent(q.gpu.data, q_pos.gpu.data, kd.gpu.data, positions.gpu.data,
                                             key_count.gpu.data, shape, plan, workspace.gpu.data, out.gpu.data, nullptr,
                                             UINT64_MAX);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> want_v = cpu_values(want.cpu), got = gpu_values(out.gpu);
  EXPECT_LE(test::relative_l2(got.data(), want_v.data(), want_v.size()), 1e-3);
}

// A decode step of several sequences of one paged latent pool (attention_batch): their blocks shuffled in the pool,
// slots past each sequence's keys holding NaN; each row against the CPU's attention of that sequence alone. An f32
// pool takes the fp32 latent kernel, an f16 one the tensor cores (which round Q and P to f16).
TEST_F(DeepseekOps, BatchedLatentDecodeOverAPagedPool) {
  const int heads = 16, row = 288, block = 16;
  const std::vector<int32_t> keys = {5, 40, 17};
  const int64_t widest = 3, items = static_cast<int64_t>(keys.size()), pool_rows = items * widest * block;
  std::vector<int32_t> order(static_cast<size_t>(items * widest));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>((i * 5 + 2) % order.size());
  std::vector<float> values = test::random_normal(static_cast<size_t>(pool_rows * row), 61);
  std::vector<int32_t> positions(static_cast<size_t>(pool_rows), 1 << 20);
  for (int64_t i = 0; i < items; ++i)
    for (int64_t j = 0; j < widest * block; ++j) {
      const int64_t pool_row = int64_t{order[static_cast<size_t>(i * widest + j / block)]} * block + j % block;
      if (j < keys[static_cast<size_t>(i)]) {
        positions[static_cast<size_t>(pool_row)] = static_cast<int32_t>(j);
      } else {
        for (int d = 0; d < row; ++d) values[static_cast<size_t>(pool_row * row + d)] = NAN;  // not written yet
      }
    }
  for (KvType type : {KvType::kF32, KvType::kF16}) {
    const auto pool = input_values(test::kv_type_bits(type, values, values.size()), pool_rows, kv_row_bytes(type, row));
    const KvView cpu_view{pool.cpu.data, pool_rows, row, type}, gpu_view{pool.gpu.data, pool_rows, row, type};
    const auto pos = input_values(positions, pool_rows, 1);
    const auto tables = input_values(order, items, widest);
    const auto counts = input_values(keys, items, 1);
    std::vector<int32_t> q_positions;
    for (int32_t k : keys) q_positions.push_back(k - 1);
    const auto q_pos = input_values(q_positions, items, 1);
    const auto q = input(items, heads * row, 62);
    AttentionParams params{heads, 1, row, 0.1f};
    params.values_are_keys = true;
    const auto want = output(items, heads * row), out = output(items, heads * row);
    for (int64_t i = 0; i < items; ++i) {
      const KvLayerView alone{cpu_view, cpu_view, pos.cpu, {}, tables.cpu.row_range(i, 1).reshaped(widest, 1), block};
      ASSERT_TRUE(cpu_.attention(q.cpu.row_range(i, 1), q_pos.cpu.row_range(i, 1), alone,
                                 counts.cpu.row_range(i, 1), params, want.cpu.row_range(i, 1))
                      .ok());
    }
    auto ws = allocate_scoped(*gpu_, gpu_->attention_batch_workspace_bytes(items, params, widest * block));
    ASSERT_TRUE(ws.ok());
    const KvLayerView gpu_pool{gpu_view, gpu_view, pos.gpu, ws->buffer(), {}, block};
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->attention_batch(q.gpu, q_pos.gpu, gpu_pool, tables.gpu, counts.gpu, params, out.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "the latent kernel and its merge";
#endif
    const std::vector<float> want_v = cpu_values(want.cpu), got = gpu_values(out.gpu);
    EXPECT_LE(test::relative_l2(got.data(), want_v.data(), want_v.size()), type == KvType::kF16 ? 1e-3 : 1e-5)
        << kv_type_name(type);
  }
}

}  // namespace
}  // namespace qrt
