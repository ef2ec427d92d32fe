// The ops the newer architectures add, on the CUDA backend against the CPU reference: Gemma's gated tanh GELU,
// embedding scale and final-logit soft-capping; gpt-oss's clamped SwiGLU and expert-bias rows added by id; and
// attention with soft-capped scores (Gemma 2) or a sink logit per head (gpt-oss) through every attention kernel
// (per-head, split decode with its merge, tensor-core prompt, attention_batch's paged decode).
#include <cmath>
#include <functional>
#include <limits>

#include "backend_pair.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

class ModelFeatureOps : public test::BackendPair {
 protected:
  struct KernelCase {
    const char* kernel;
    KvType type;
    int window;
    int64_t tokens, keys;
    bool workspace;     // a split-attention workspace (attention_workspace_bytes), as a decode sequence has
    uint64_t launches;  // kernels the GPU op launches
  };
  static constexpr int kHeads = 8, kKvHeads = 2, kHeadDim = 64;
  static std::vector<KernelCase> kernel_cases() {
    return {{"per-head", KvType::kF32, 0, 5, 40, false, 1},
            {"per-head windowed", KvType::kF32, 3, 5, 40, false, 1},
            {"split decode", KvType::kF32, 0, 1, 300, true, 2},
            {"split decode windowed", KvType::kF32, 7, 1, 300, true, 2},
            {"tensor-core prompt", KvType::kF16, 4, 40, 50, false, 1}};
  }
  // Attention of c.tokens queries (N(0, q_scale²)) over a random cache whose slot j holds position j, with
  // params(gpu) on each backend: the GPU against the CPU, and the CPU far from its result under `plain` (the
  // feature off), so that a kernel that ignored the feature would fail.
  void check_variant(const KernelCase& c, float q_scale, const std::function<AttentionParams(bool gpu)>& params,
                     const AttentionParams& plain, const std::string& what) {
    const int64_t q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim, capacity = c.keys + 4;
    const std::vector<float> k = test::random_normal(static_cast<size_t>(capacity * kv_dim), 31 + c.keys);
    const std::vector<float> v = test::random_normal(static_cast<size_t>(capacity * kv_dim), 32 + c.keys);
    const auto kd = input_values(test::kv_type_bits(c.type, k, k.size()), capacity, kv_row_bytes(c.type, kv_dim));
    const auto vd = input_values(test::kv_type_bits(c.type, v, v.size()), capacity, kv_row_bytes(c.type, kv_dim));
    const KvView kc{kd.cpu.data, capacity, kv_dim, c.type}, kg{kd.gpu.data, capacity, kv_dim, c.type};
    const KvView vc{vd.cpu.data, capacity, kv_dim, c.type}, vg{vd.gpu.data, capacity, kv_dim, c.type};
    std::vector<int32_t> pos(static_cast<size_t>(capacity));
    for (int64_t j = 0; j < capacity; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    const auto positions = input_values(pos, capacity, 1);
    const auto q = input(c.tokens, q_dim, 33 + c.tokens, q_scale);
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    ScopedBuffer workspace;
    if (c.workspace) {
      auto w = allocate_scoped(*gpu_, gpu_->attention_workspace_bytes(c.tokens, params(true), capacity));
      ASSERT_TRUE(w.ok());
      workspace = std::move(*w);
    }
    const ConstI32View cpu_q_pos = positions.cpu.row_range(c.keys - c.tokens, c.tokens);
    const ConstI32View gpu_q_pos = positions.gpu.row_range(c.keys - c.tokens, c.tokens);
    const KvLayerView cpu_cache{kc, vc, positions.cpu, {}}, gpu_cache{kg, vg, positions.gpu, workspace.buffer()};
    const auto out = output(c.tokens, q_dim), off = output(c.tokens, q_dim);
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q_pos, cpu_cache, key_count.cpu, params(false), out.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->attention(q.gpu, gpu_q_pos, gpu_cache, key_count.gpu, params(true), out.gpu);
    ASSERT_TRUE(s.ok()) << what << ", " << c.kernel << ": " << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, c.launches) << what << ", " << c.kernel;
#endif
    // The tensor-core kernel rounds q and the probabilities to f16 (kv_cache_types_test.cpp's bound).
    const double bound = c.type == KvType::kF16 ? 1e-3 : 1e-5;
    expect_close(out, bound, what + ", " + c.kernel);
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q_pos, cpu_cache, key_count.cpu, plain, off.cpu).ok());
    const std::vector<float> with = cpu_values(out.cpu), without = cpu_values(off.cpu);
    EXPECT_GT(test::relative_l2(without.data(), with.data(), with.size()), 50 * bound)
        << what << ", " << c.kernel << ": the feature must matter here";
  }
};

TEST_F(ModelFeatureOps, GeluTanhMulScaleAndSoftcap) {
  for (int64_t cols : {int64_t{1}, int64_t{333}, int64_t{4096}}) {
    const std::string n = std::to_string(cols);
    const auto gate = input(7, cols, 700 + cols, 3.0f), up = input(7, cols, 800 + cols);
    const auto out = output(7, cols);
    ASSERT_TRUE(cpu_.gelu_tanh_mul(gate.cpu, up.cpu, out.cpu).ok());
    ASSERT_TRUE(gpu_->gelu_tanh_mul(gate.gpu, up.gpu, out.gpu).ok());
    expect_close(out, 1e-5, "gelu_tanh_mul " + n);
    ASSERT_TRUE(cpu_.gelu_tanh_mul(gate.cpu, up.cpu, gate.cpu).ok());  // out = gate, as the transformer calls it
    ASSERT_TRUE(gpu_->gelu_tanh_mul(gate.gpu, up.gpu, gate.gpu).ok());
    expect_close(gate, 1e-5, "gelu_tanh_mul in place " + n);

    const auto x = input(7, cols, 900 + cols, 20.0f);
    const auto scaled = output(7, cols);
    ASSERT_TRUE(cpu_.scale(x.cpu, 48.0f, scaled.cpu).ok());
    ASSERT_TRUE(gpu_->scale(x.gpu, 48.0f, scaled.gpu).ok());
    EXPECT_EQ(gpu_values(scaled.gpu), cpu_values(scaled.cpu)) << "one fp32 product is exact on both, " << n;
    // Logits of N(0, 20²) against a cap of 30: tanh well into its bend.
    const auto capped = output(7, cols);
    ASSERT_TRUE(cpu_.softcap(x.cpu, 30.0f, capped.cpu).ok());
    ASSERT_TRUE(gpu_->softcap(x.gpu, 30.0f, capped.gpu).ok());
    expect_close(capped, 1e-6, "softcap " + n);
    for (float v : cpu_values(capped.cpu)) ASSERT_LT(std::fabs(v), 30.0f);
    ASSERT_TRUE(cpu_.softcap(x.cpu, 30.0f, x.cpu).ok());  // in place, as on the logits
    ASSERT_TRUE(gpu_->softcap(x.gpu, 30.0f, x.gpu).ok());
    expect_close(x, 1e-6, "softcap in place " + n);
  }
  // GELU's tanh form at known points (torch.nn.functional.gelu(x, approximate="tanh") * 1).
  const auto g = input_values(std::vector<float>{-3.0f, -1.0f, 0.0f, 0.5f, 2.0f}, 1, 5);
  const auto ones = input_values(std::vector<float>(5, 1.0f), 1, 5);
  const auto y = output(1, 5);
  ASSERT_TRUE(gpu_->gelu_tanh_mul(g.gpu, ones.gpu, y.gpu).ok());
  const float want[] = {-0.0036373f, -0.1588080f, 0.0f, 0.3457140f, 1.9545977f};
  const std::vector<float> got = gpu_values(y.gpu);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(got[static_cast<size_t>(i)], want[i], 2e-6f) << i;

  const auto a = input(2, 8, 1), b = output(2, 8), wrong = output(2, 7);
  for (Backend* be : {static_cast<Backend*>(&cpu_), static_cast<Backend*>(gpu_.get())}) {
    const F32View out_view = be == &cpu_ ? b.cpu : b.gpu;
    const F32View in_view = be == &cpu_ ? a.cpu : a.gpu;
    EXPECT_EQ(be->softcap(in_view, 0.0f, out_view).code(), ErrorCode::kInvalidArgument) << be->name();
    EXPECT_EQ(be->softcap(in_view, std::numeric_limits<float>::infinity(), out_view).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(be->scale(in_view, 2.0f, be == &cpu_ ? wrong.cpu : wrong.gpu).code(), ErrorCode::kInvalidArgument);
  }
}

TEST_F(ModelFeatureOps, ClampedSwigluAndIndexedRows) {
  for (int64_t cols : {int64_t{1}, int64_t{333}, int64_t{4096}}) {
    const std::string n = std::to_string(cols);
    // N(0, 5²) inputs against a limit of 2: most gates and ups are clamped.
    const auto gate = input(5, cols, 100 + cols, 5.0f), up = input(5, cols, 200 + cols, 5.0f);
    const auto out = output(5, cols);
    ASSERT_TRUE(cpu_.swiglu_clamped_mul(gate.cpu, up.cpu, 1.702f, 2.0f, out.cpu).ok());
    ASSERT_TRUE(gpu_->swiglu_clamped_mul(gate.gpu, up.gpu, 1.702f, 2.0f, out.gpu).ok());
    expect_close(out, 1e-5, "swiglu_clamped_mul " + n);
    ASSERT_TRUE(cpu_.swiglu_clamped_mul(gate.cpu, up.cpu, 1.702f, 2.0f, gate.cpu).ok());  // in place
    ASSERT_TRUE(gpu_->swiglu_clamped_mul(gate.gpu, up.gpu, 1.702f, 2.0f, gate.gpu).ok());
    expect_close(gate, 1e-5, "swiglu_clamped_mul in place " + n);
  }
  // Known values: gate 10 clamps to 2 (2 sigmoid(3.404) = 1.9358), up 10 to 2 (+ 1 = 3); up -10 to -2 (+ 1 = -1).
  const auto g = input_values(std::vector<float>{10.0f, 10.0f, -1.0f, 0.0f}, 1, 4);
  const auto u = input_values(std::vector<float>{10.0f, -10.0f, 0.5f, 3.0f}, 1, 4);
  const auto y = output(1, 4);
  ASSERT_TRUE(gpu_->swiglu_clamped_mul(g.gpu, u.gpu, 1.702f, 2.0f, y.gpu).ok());
  const std::vector<float> got = gpu_values(y.gpu);
  const double s2 = 2.0 / (1.0 + std::exp(-3.404)), s1 = -1.0 / (1.0 + std::exp(1.702));
  const double want[] = {3.0 * s2, -1.0 * s2, 1.5 * s1, 0.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[static_cast<size_t>(i)], want[i], 1e-6) << i;

  // Rows of a 5-expert table added by the router's ids (3 tokens, top 2, repeats allowed).
  const auto table = input(5, 96, 300);
  const auto ids = input_values(std::vector<int32_t>{4, 0, 2, 2, 1, 4}, 3, 2);
  const auto rows = input(6, 96, 301);
  ASSERT_TRUE(cpu_.add_indexed_rows(rows.cpu, table.cpu, ids.cpu).ok());
  ASSERT_TRUE(gpu_->add_indexed_rows(rows.gpu, table.gpu, ids.gpu).ok());
  EXPECT_EQ(gpu_values(rows.gpu), cpu_values(rows.cpu)) << "one fp32 add per element on both";
  const auto bad = input_values(std::vector<int32_t>{0, 5, 1, 1, 2, 2}, 3, 2);
  EXPECT_EQ(cpu_.add_indexed_rows(rows.cpu, table.cpu, bad.cpu).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(gpu_->add_indexed_rows(rows.gpu, table.gpu, ids.gpu.row_range(0, 2)).code(), ErrorCode::kInvalidArgument);
}

// Scores soft-capped at 2 (q scaled so that most scores pass 2 before the cap), on every kernel.
TEST_F(ModelFeatureOps, SoftCappedAttentionOnEveryKernel) {
  for (const KernelCase& c : kernel_cases()) {
    const AttentionParams plain{kHeads, kKvHeads, kHeadDim, 1.0f / 8.0f, c.window};
    AttentionParams capped = plain;
    capped.softcap = 2.0f;
    check_variant(c, 4.0f, [&](bool) { return capped; }, plain, "soft-capped attention");
  }
  // A negative or infinite cap is refused before any kernel runs.
  const int64_t q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
  const auto q = input(1, q_dim, 1), out = output(1, q_dim);
  const auto kd = input(8, kv_dim, 2), vd = input(8, kv_dim, 3);
  const auto positions = input_values(std::vector<int32_t>(8, 0), 8, 1);
  const auto count = input_values(std::vector<int32_t>{8}, 1, 1);
  for (float cap : {-1.0f, std::numeric_limits<float>::infinity()}) {
    const AttentionParams bad{kHeads, kKvHeads, kHeadDim, 0.125f, 0, cap};
    EXPECT_EQ(gpu_->attention(q.gpu, positions.gpu.row_range(0, 1), KvLayerView{kd.gpu, vd.gpu, positions.gpu, {}},
                              count.gpu, bad, out.gpu)
                  .code(),
              ErrorCode::kInvalidArgument);
  }
}

// Sinks of N(0, 2²) per head (so that some dominate their softmax), on every kernel.
TEST_F(ModelFeatureOps, AttentionSinksOnEveryKernel) {
  const auto sinks = input(1, kHeads, 41, 2.0f);
  for (const KernelCase& c : kernel_cases()) {
    const AttentionParams plain{kHeads, kKvHeads, kHeadDim, 1.0f / 8.0f, c.window};
    const auto with_sinks = [&](bool gpu) {
      AttentionParams p = plain;
      p.sinks = gpu ? sinks.gpu.data : sinks.cpu.data;
      return p;
    };
    check_variant(c, 2.0f, with_sinks, plain, "attention with sinks");
  }
}

// attention_batch (decode rows of several sequences in one paged pool): the sinks reach the batched split kernel.
TEST_F(ModelFeatureOps, BatchedPagedDecodeWithSinks) {
  const int heads = 4, kv_heads = 2, hd = 32, block = 16;
  const int64_t kv_dim = kv_heads * hd, q_dim = heads * hd, blocks = 8, rows = blocks * block;
  const auto k = input(rows, kv_dim, 61), v = input(rows, kv_dim, 62);
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = static_cast<int32_t>(r % (3 * block));
  const auto positions = input_values(pos, rows, 1);
  // Two sequences: blocks {0, 1, 2} (40 keys) and {5, 3, 4} (20 keys).
  const auto tables = input_values(std::vector<int32_t>{0, 1, 2, 5, 3, 4}, 2, 3);
  const auto keys = input_values(std::vector<int32_t>{40, 20}, 2, 1);
  const auto q_pos = input_values(std::vector<int32_t>{39, 19}, 2, 1);
  const auto q = input(2, q_dim, 63, 2.0f);
  const auto sinks = input(1, heads, 64, 2.0f);
  AttentionParams p{heads, kv_heads, hd, 1.0f / std::sqrt(32.0f), 0};
  auto workspace = allocate_scoped(*gpu_, gpu_->attention_batch_workspace_bytes(2, p, 3 * block));
  ASSERT_TRUE(workspace.ok());
  const auto out = output(2, q_dim);
  const KvLayerView cpu_pool{k.cpu, v.cpu, positions.cpu, {}, {}, block};
  KvLayerView gpu_pool{k.gpu, v.gpu, positions.gpu, workspace->buffer(), {}, block};
  p.sinks = sinks.cpu.data;
  ASSERT_TRUE(cpu_.attention_batch(q.cpu, q_pos.cpu, cpu_pool, tables.cpu, keys.cpu, p, out.cpu).ok());
  p.sinks = sinks.gpu.data;
#if defined(QRT_SIMT)
  const simt::StreamCounters before = simt::device_counters(0);
#endif
  const Status s = gpu_->attention_batch(q.gpu, q_pos.gpu, gpu_pool, tables.gpu, keys.gpu, p, out.gpu);
  ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
  EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "one split and one merge for both rows";
#endif
  expect_close(out, 1e-5, "attention_batch with sinks");
}

}  // namespace
}  // namespace qrt
