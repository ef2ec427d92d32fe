// Attention over a paged KV cache (KvLayerView::block_table): a sequence's slots scattered over a pool of blocks in
// a shuffled order, among blocks of other sequences that hold NaN at positions every query could see; f32, f16,
// bf16 and fp8 caches. The CPU
// backend's paged attention must equal its attention over the same slots stored contiguously, bit for bit, and the
// CUDA backend's (each of its three kernels: per-head, split decode, tensor-core prompt) must match the CPU's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "backend_pair.hpp"
#include "kernels/quant/common.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using test::Dual;

struct PagedCase {
  int heads, kv_heads, head_dim, window;
  int64_t tokens, keys;
  int block_size;
  KvType type;
  bool workspace;  // give attention the split kernel's workspace
};

class CudaPagedAttention : public test::BackendPair {
 protected:
  // [rows, kv_dim] values rounded to `type`, the same bits on both backends.
  Dual<uint8_t> kv_bits(KvType type, const std::vector<float>& values, int64_t rows, int64_t kv_dim) {
    return input_values(test::kv_type_bits(type, values, static_cast<size_t>(rows * kv_dim)), rows,
                        kv_row_bytes(type, kv_dim));
  }

  void check(const PagedCase& c) {
    const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " hd " +
                             std::to_string(c.head_dim) + " window " + std::to_string(c.window) + " tokens " +
                             std::to_string(c.tokens) + " keys " + std::to_string(c.keys) + " block " +
                             std::to_string(c.block_size) + " type " + std::string(kv_type_name(c.type)) +
                             (c.workspace ? " split" : "");
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
    const int64_t b = c.block_size;
    const int64_t seq_blocks = (c.keys + b - 1) / b;
    const int64_t pool_blocks = 2 * seq_blocks + 3;  // other sequences' blocks around this one's
    const int64_t pool_rows = pool_blocks * b, slots = seq_blocks * b;

    // The sequence as one contiguous cache: positions 0.. (every ninth slot a later token: invisible, NaN).
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> k = test::random_normal(static_cast<size_t>(slots * kv_dim), 100 + c.keys);
    std::vector<float> v = test::random_normal(static_cast<size_t>(slots * kv_dim), 200 + c.keys);
    std::vector<int32_t> pos(static_cast<size_t>(slots));
    for (int64_t j = 0; j < slots; ++j) {
      const bool future = j % 9 == 4 || j >= c.keys;
      pos[static_cast<size_t>(j)] = static_cast<int32_t>(future ? 1000000 + j : j);
      if (!future) continue;
      std::fill_n(k.begin() + j * kv_dim, kv_dim, nan);
      std::fill_n(v.begin() + j * kv_dim, kv_dim, nan);
    }
    // The pool: the sequence's blocks at shuffled places; every other row NaN at position 0 (visible to every
    // query, so a wrong row shows as NaN or as a different value).
    std::vector<int32_t> table(static_cast<size_t>(pool_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(static_cast<uint32_t>(c.keys * 31 + b)));
    table.resize(static_cast<size_t>(seq_blocks));
    std::vector<float> pool_k(static_cast<size_t>(pool_rows * kv_dim), nan), pool_v = pool_k;
    std::vector<int32_t> pool_pos(static_cast<size_t>(pool_rows), 0);
    for (int64_t j = 0; j < slots; ++j) {
      const int64_t row = int64_t{table[static_cast<size_t>(j / b)]} * b + j % b;
      std::copy_n(k.begin() + j * kv_dim, kv_dim, pool_k.begin() + row * kv_dim);
      std::copy_n(v.begin() + j * kv_dim, kv_dim, pool_v.begin() + row * kv_dim);
      pool_pos[static_cast<size_t>(row)] = pos[static_cast<size_t>(j)];
    }

    const Dual<uint8_t> kc = kv_bits(c.type, k, slots, kv_dim), vc = kv_bits(c.type, v, slots, kv_dim);
    const Dual<int32_t> positions = input_values(pos, slots, 1);
    const Dual<uint8_t> pk = kv_bits(c.type, pool_k, pool_rows, kv_dim);
    const Dual<uint8_t> pv = kv_bits(c.type, pool_v, pool_rows, kv_dim);
    const Dual<int32_t> pp = input_values(pool_pos, pool_rows, 1);
    const Dual<int32_t> tbl = input_values(table, seq_blocks, 1);

    std::vector<int32_t> qp;  // the last rows of a prompt: positions keys - tokens .. keys - 1
    for (int64_t t = 0; t < c.tokens; ++t) qp.push_back(static_cast<int32_t>(c.keys - c.tokens + t));
    const Dual<int32_t> q_pos = input_values(qp, c.tokens, 1);
    const Dual<float> q = input(c.tokens, q_dim, 300 + c.keys);
    const Dual<int32_t> key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    const AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                            c.window};

    const auto view = [&](const Dual<uint8_t>& bytes, int64_t rows, bool gpu) {
      return KvView{gpu ? bytes.gpu.data : bytes.cpu.data, rows, kv_dim, c.type};
    };
    const KvLayerView contiguous{view(kc, slots, false), view(vc, slots, false), positions.cpu, {}};
    const KvLayerView paged_cpu{view(pk, pool_rows, false), view(pv, pool_rows, false), pp.cpu, {}, tbl.cpu,
                                c.block_size};
    const Dual<float> want = output(c.tokens, q_dim), out = output(c.tokens, q_dim);
    ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, contiguous, key_count.cpu, p, want.cpu).ok()) << what;
    Status s = cpu_.attention(q.cpu, q_pos.cpu, paged_cpu, key_count.cpu, p, out.cpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    EXPECT_EQ(cpu_values(out.cpu), cpu_values(want.cpu)) << "CPU paged vs contiguous, " << what;

    KvLayerView paged_gpu{view(pk, pool_rows, true), view(pv, pool_rows, true), pp.gpu, {}, tbl.gpu, c.block_size};
    std::optional<ScopedBuffer> workspace;
    if (c.workspace) {
      const uint64_t bytes = gpu_->attention_workspace_bytes(c.tokens, p, slots);
      ASSERT_GT(bytes, 0u) << what;
      auto w = allocate_scoped(*gpu_, bytes);
      ASSERT_TRUE(w.ok());
      workspace = std::move(*w);
      paged_gpu.attention_workspace = workspace->buffer();
    }
    s = gpu_->attention(q.gpu, q_pos.gpu, paged_gpu, key_count.gpu, p, out.gpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    // Prompts: the tensor-core kernel rounds Q and P to the cache's 16-bit type (fp16 for fp8, whose values it holds
    // exactly, and q8_0, whose values it rounds to fp16 too).
    const double bound = c.type == KvType::kF32 || c.tokens < 16
                             ? 1e-5
                             : (c.type == KvType::kF16 || c.type == KvType::kFp8
                                    ? 2e-3
                                    : (c.type == KvType::kQ8_0 ? 4e-3 : 1e-2));
    expect_close(out, bound, "CUDA paged vs CPU, " + what);
  }
};

TEST_F(CudaPagedAttention, MatchesContiguousForEveryKernel) {
  for (const PagedCase& c : {
           // decode, per-head kernel: block sizes 1, 16, 64; keys inside and at the end of a block
           PagedCase{8, 2, 64, 0, 1, 37, 16, KvType::kF32, false},
           PagedCase{8, 8, 32, 0, 1, 48, 16, KvType::kF16, false},
           PagedCase{4, 4, 32, 0, 1, 9, 1, KvType::kF32, false},
           PagedCase{16, 2, 64, 10, 2, 130, 64, KvType::kBF16, false},
           // decode, split kernel (flash-decoding over the table), GQA 1/4/8
           PagedCase{32, 8, 128, 0, 1, 33, 16, KvType::kF16, true},
           PagedCase{32, 4, 128, 0, 1, 1025, 16, KvType::kF16, true},
           PagedCase{8, 8, 64, 0, 1, 300, 32, KvType::kF32, true},
           PagedCase{16, 2, 64, 7, 1, 200, 16, KvType::kBF16, true},
           PagedCase{16, 4, 64, 0, 1, 77, 16, KvType::kFp8, true},
           PagedCase{8, 2, 32, 0, 20, 60, 16, KvType::kFp8, false},
           PagedCase{16, 4, 64, 0, 1, 77, 16, KvType::kQ8_0, true},
           PagedCase{8, 2, 32, 0, 20, 60, 8, KvType::kQ8_0, false},
           // prompts: tensor-core kernel on 16-bit, fp8 and q8_0 caches, per-head kernel on f32
           PagedCase{8, 2, 64, 0, 40, 90, 16, KvType::kF16, false},
           PagedCase{4, 4, 128, 0, 70, 70, 32, KvType::kBF16, false},
           PagedCase{8, 2, 64, 0, 40, 90, 16, KvType::kFp8, false},
           PagedCase{4, 4, 128, 0, 70, 70, 32, KvType::kQ8_0, false},
           PagedCase{8, 4, 32, 0, 20, 50, 16, KvType::kF32, false},
       }) {
    check(c);
  }
}

// attention_batch: sequences of different lengths sharing one pool (blocks interleaved, tables padded to the longest
// with block 0, NaN in every row no query may read), one decode row each. The CPU backend's (row by row) must equal
// its attention of each sequence alone bit for bit; the CUDA backend's one launch must match it, with and without
// the workspace (without: row by row through attention()).
struct BatchCase {
  int heads, kv_heads, head_dim, window, block_size;
  std::vector<int32_t> keys;  // per sequence
  KvType type;
};

class CudaAttentionBatch : public CudaPagedAttention {
 protected:
  void check(const BatchCase& c, bool workspace) {
    std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " hd " +
                       std::to_string(c.head_dim) + " window " + std::to_string(c.window) + " block " +
                       std::to_string(c.block_size) + " type " + std::string(kv_type_name(c.type)) + " keys";
    for (int32_t k : c.keys) what += " " + std::to_string(k);
    if (workspace) what += " (workspace)";
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
    const int64_t b = c.block_size, items = static_cast<int64_t>(c.keys.size());
    std::vector<int64_t> blocks;
    int64_t total_blocks = 0, widest = 0;
    for (int32_t k : c.keys) {
      blocks.push_back((k + b - 1) / b);
      total_blocks += blocks.back();
      widest = std::max(widest, blocks.back());
    }
    const int64_t pool_blocks = total_blocks + 2, pool_rows = pool_blocks * b;
    // Blocks dealt out in a shuffled order; the pool starts as NaN rows at position 0, visible to any query.
    std::vector<int32_t> order(static_cast<size_t>(pool_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(items * 7 + b)));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> pool_k(static_cast<size_t>(pool_rows * kv_dim), nan), pool_v = pool_k;
    std::vector<int32_t> pool_pos(static_cast<size_t>(pool_rows), 0);
    std::vector<int32_t> tables(static_cast<size_t>(items * widest), 0), q_positions;
    const std::vector<float> values = test::random_normal(static_cast<size_t>(2 * pool_rows * kv_dim), 900 + items);
    size_t next = 0;
    for (int64_t i = 0; i < items; ++i) {
      const int64_t keys = c.keys[static_cast<size_t>(i)];
      for (int64_t j = 0; j < blocks[static_cast<size_t>(i)]; ++j)
        tables[static_cast<size_t>(i * widest + j)] = order[next++];
      for (int64_t j = 0; j < keys; ++j) {
        const int64_t row = int64_t{tables[static_cast<size_t>(i * widest + j / b)]} * b + j % b;
        std::copy_n(values.begin() + row * kv_dim, kv_dim, pool_k.begin() + row * kv_dim);
        std::copy_n(values.begin() + (pool_rows + row) * kv_dim, kv_dim, pool_v.begin() + row * kv_dim);
        pool_pos[static_cast<size_t>(row)] = static_cast<int32_t>(j);
      }
      // The rest of the sequence's last block: NaN rows of later positions (not yet written).
      for (int64_t j = keys; j < blocks[static_cast<size_t>(i)] * b; ++j)
        pool_pos[static_cast<size_t>(int64_t{tables[static_cast<size_t>(i * widest + j / b)]} * b + j % b)] =
            static_cast<int32_t>(1000000 + j);
      q_positions.push_back(static_cast<int32_t>(keys - 1));
    }
    const Dual<uint8_t> pk = kv_bits(c.type, pool_k, pool_rows, kv_dim);
    const Dual<uint8_t> pv = kv_bits(c.type, pool_v, pool_rows, kv_dim);
    const Dual<int32_t> pp = input_values(pool_pos, pool_rows, 1);
    const Dual<int32_t> tbl = input_values(tables, items, widest);
    const Dual<int32_t> key_counts = input_values(c.keys, items, 1);
    const Dual<int32_t> q_pos = input_values(q_positions, items, 1);
    const Dual<float> q = input(items, q_dim, 77 + items);
    const AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                            c.window};
    const auto pool = [&](bool gpu) {
      return KvLayerView{KvView{gpu ? pk.gpu.data : pk.cpu.data, pool_rows, kv_dim, c.type},
                         KvView{gpu ? pv.gpu.data : pv.cpu.data, pool_rows, kv_dim, c.type},
                         gpu ? pp.gpu : pp.cpu,
                         {},
                         {},
                         c.block_size};
    };

    const Dual<float> want = output(items, q_dim), out = output(items, q_dim);
    for (int64_t i = 0; i < items; ++i) {
      KvLayerView alone = pool(false);
      alone.block_table = tbl.cpu.row_range(i, 1).reshaped(blocks[static_cast<size_t>(i)], 1);
      ASSERT_TRUE(cpu_.attention(q.cpu.row_range(i, 1), q_pos.cpu.row_range(i, 1), alone,
                                 key_counts.cpu.row_range(i, 1), p, want.cpu.row_range(i, 1))
                      .ok())
          << what;
    }
    Status s = cpu_.attention_batch(q.cpu, q_pos.cpu, pool(false), tbl.cpu, key_counts.cpu, p, out.cpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    EXPECT_EQ(cpu_values(out.cpu), cpu_values(want.cpu)) << "CPU batch vs each alone, " << what;

    KvLayerView gpu_pool = pool(true);
    std::optional<ScopedBuffer> ws;
    if (workspace) {
      const uint64_t bytes = gpu_->attention_batch_workspace_bytes(items, p, widest * b);
      ASSERT_GT(bytes, 0u) << what;
      auto w = allocate_scoped(*gpu_, bytes);
      ASSERT_TRUE(w.ok());
      ws = std::move(*w);
      gpu_pool.attention_workspace = ws->buffer();
    }
    s = gpu_->attention_batch(q.gpu, q_pos.gpu, gpu_pool, tbl.gpu, key_counts.gpu, p, out.gpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    expect_close(out, 1e-5, "CUDA attention_batch vs CPU, " + what);
  }
};

TEST_F(CudaAttentionBatch, EachRowEqualsItsSequenceAlone) {
  for (const BatchCase& c : {
           BatchCase{32, 8, 128, 0, 16, {1, 33, 17, 200, 16}, KvType::kF16},
           BatchCase{8, 8, 64, 0, 16, {5, 64, 3}, KvType::kF32},
           BatchCase{32, 4, 128, 0, 32, {700, 31, 32, 33}, KvType::kBF16},
           BatchCase{16, 2, 64, 9, 8, {40, 12}, KvType::kFp8},
           BatchCase{16, 4, 64, 0, 16, {77, 2, 45}, KvType::kQ8_0},
       }) {
    check(c, true);
    check(c, false);
  }
}

// Shapes the op refuses by name: a key count or table per row missing.
TEST_F(CudaAttentionBatch, RefusesTablesThatDoNotMatchTheRows) {
  const AttentionParams p{2, 1, 32, 0.2f, 0};
  const Dual<float> pool_k = input(32, 32, 1), pool_v = input(32, 32, 2);
  const Dual<int32_t> pos = input_values(std::vector<int32_t>(32, 0), 32, 1);
  const KvLayerView pool{pool_k.gpu, pool_v.gpu, pos.gpu, {}, {}, 16};
  const Dual<float> q = input(3, 64, 3), out = output(3, 64);
  const Dual<int32_t> q_pos = input_values(std::vector<int32_t>{0, 0, 0}, 3, 1);
  const Dual<int32_t> keys = input_values(std::vector<int32_t>{1, 1, 1}, 3, 1);
  const Dual<int32_t> two_tables = input_values(std::vector<int32_t>{0, 1}, 2, 1);
  Status s = gpu_->attention_batch(q.gpu, q_pos.gpu, pool, two_tables.gpu, keys.gpu, p, out.gpu);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("one table row and one key count per row"), std::string::npos) << s.to_string();
  const Dual<int32_t> tables = input_values(std::vector<int32_t>{0, 1, 0}, 3, 1);
  EXPECT_TRUE(gpu_->attention_batch(q.gpu, q_pos.gpu, pool, tables.gpu, keys.gpu, p, out.gpu).ok());
  s = gpu_->attention_batch(q.gpu, q_pos.gpu, pool, tables.gpu, keys.gpu.row_range(0, 2), p, out.gpu);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
}

// The CPU backend checks what a GPU cannot: a table entry outside the pool, a block size that is not a power of
// two, and a key count beyond the table's slots.
TEST_F(CudaPagedAttention, CpuRefusesBadTables) {
  const int64_t kv_dim = 32, rows = 64;
  const Dual<float> pool = input(rows, kv_dim, 5), pool_v = input(rows, kv_dim, 6);
  const Dual<int32_t> pos = input_values(std::vector<int32_t>(rows, 0), rows, 1);
  const Dual<float> q = input(1, kv_dim, 7);
  const Dual<int32_t> q_pos = input_values(std::vector<int32_t>{3}, 1, 1);
  const AttentionParams p{1, 1, 32, 0.2f, 0};
  const auto run = [&](std::vector<int32_t> table, int block_size, int32_t keys) {
    const Dual<int32_t> t = input_values(table, static_cast<int64_t>(table.size()), 1);
    const Dual<int32_t> count = input_values(std::vector<int32_t>{keys}, 1, 1);
    const KvLayerView cache{pool.cpu, pool_v.cpu, pos.cpu, {}, t.cpu, block_size};
    const Dual<float> out = output(1, kv_dim);
    return cpu_.attention(q.cpu, q_pos.cpu, cache, count.cpu, p, out.cpu);
  };
  EXPECT_TRUE(run({3, 0}, 16, 20).ok());
  const Status outside = run({3, 4}, 16, 20);  // the pool has blocks 0..3
  EXPECT_EQ(outside.code(), ErrorCode::kOutOfRange) << outside.to_string();
  EXPECT_NE(outside.message().find("outside the pool of 4 blocks"), std::string::npos) << outside.to_string();
  EXPECT_TRUE(run({3, 4}, 16, 16).ok()) << "an entry past the key count is not read";
  EXPECT_EQ(run({0, 1}, 12, 20).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run({0, 1}, 16, 33).code(), ErrorCode::kOutOfRange);
}

}  // namespace
}  // namespace qrt
