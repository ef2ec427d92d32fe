// The ops Gemma adds, on the CUDA backend against the CPU reference: GeGLU's gated tanh GELU, the embedding scale,
// final-logit soft-capping, and attention with soft-capped scores through each attention kernel (per-head, split
// decode with its merge, tensor-core prompt).
#include <cmath>
#include <limits>

#include "backend_pair.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

class GemmaOps : public test::BackendPair {};

TEST_F(GemmaOps, GeluTanhMulScaleAndSoftcap) {
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

// Scores soft-capped at 2 (q scaled so that most scores pass 2 before the cap): every kernel against the CPU, and
// far from the uncapped result, so a kernel that skipped the cap would fail.
TEST_F(GemmaOps, SoftCappedAttentionOnEveryKernel) {
  struct Case {
    const char* kernel;
    KvType type;
    int window;
    int64_t tokens, keys;
    bool workspace;
    uint64_t launches;
  };
  const int heads = 8, kv_heads = 2, hd = 64;
  const int64_t q_dim = heads * hd, kv_dim = kv_heads * hd;
  for (const Case& c : {Case{"per-head", KvType::kF32, 0, 5, 40, false, 1},
                        Case{"per-head windowed", KvType::kF32, 3, 5, 40, false, 1},
                        Case{"split decode", KvType::kF32, 0, 1, 300, true, 2},
                        Case{"split decode windowed", KvType::kF32, 7, 1, 300, true, 2},
                        Case{"tensor-core prompt", KvType::kF16, 0, 40, 50, false, 1}}) {
    const int64_t capacity = c.keys + 4;
    std::vector<float> k = test::random_normal(static_cast<size_t>(capacity * kv_dim), 31 + c.keys);
    std::vector<float> v = test::random_normal(static_cast<size_t>(capacity * kv_dim), 32 + c.keys);
    const std::vector<uint8_t> kb = test::kv_type_bits(c.type, k, k.size());
    const std::vector<uint8_t> vb = test::kv_type_bits(c.type, v, v.size());
    const auto kd = input_values(kb, capacity, kv_row_bytes(c.type, kv_dim));
    const auto vd = input_values(vb, capacity, kv_row_bytes(c.type, kv_dim));
    const KvView kc{kd.cpu.data, capacity, kv_dim, c.type}, kg{kd.gpu.data, capacity, kv_dim, c.type};
    const KvView vc{vd.cpu.data, capacity, kv_dim, c.type}, vg{vd.gpu.data, capacity, kv_dim, c.type};
    std::vector<int32_t> pos(static_cast<size_t>(capacity));
    for (int64_t j = 0; j < capacity; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    const auto positions = input_values(pos, capacity, 1);
    const auto q = input(c.tokens, q_dim, 33 + c.tokens, 4.0f);
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
    AttentionParams p{heads, kv_heads, hd, 1.0f / 8.0f, c.window, 2.0f};
    ScopedBuffer workspace;
    if (c.workspace) {
      auto w = allocate_scoped(*gpu_, gpu_->attention_workspace_bytes(c.tokens, p, capacity));
      ASSERT_TRUE(w.ok());
      workspace = std::move(*w);
    }
    const ConstI32View cpu_q_pos = positions.cpu.row_range(c.keys - c.tokens, c.tokens);
    const ConstI32View gpu_q_pos = positions.gpu.row_range(c.keys - c.tokens, c.tokens);
    const auto out = output(c.tokens, q_dim), uncapped = output(c.tokens, q_dim);
    const KvLayerView cpu_cache{kc, vc, positions.cpu, {}};
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q_pos, cpu_cache, key_count.cpu, p, out.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const KvLayerView gpu_cache{kg, vg, positions.gpu, workspace.buffer()};
    const Status s = gpu_->attention(q.gpu, gpu_q_pos, gpu_cache, key_count.gpu, p, out.gpu);
    ASSERT_TRUE(s.ok()) << c.kernel << ": " << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, c.launches) << c.kernel;
#endif
    // The tensor-core kernel rounds q and the probabilities to f16 (kv_cache_types_test.cpp's bound).
    const double bound = c.type == KvType::kF16 ? 1e-3 : 1e-5;
    expect_close(out, bound, std::string("soft-capped attention, ") + c.kernel);
    p.softcap = 0.0f;
    ASSERT_TRUE(cpu_.attention(q.cpu, cpu_q_pos, cpu_cache, key_count.cpu, p, uncapped.cpu).ok());
    const std::vector<float> with_cap = cpu_values(out.cpu), without = cpu_values(uncapped.cpu);
    EXPECT_GT(test::relative_l2(without.data(), with_cap.data(), with_cap.size()), 50 * bound)
        << c.kernel << ": the cap must matter here";
  }
  // A negative or infinite cap is refused before any kernel runs.
  const auto q = input(1, q_dim, 1), out = output(1, q_dim);
  const auto kd = input(8, kv_dim, 2), vd = input(8, kv_dim, 3);
  const auto positions = input_values(std::vector<int32_t>(8, 0), 8, 1);
  const auto count = input_values(std::vector<int32_t>{8}, 1, 1);
  const AttentionParams bad{heads, kv_heads, hd, 0.125f, 0, -1.0f};
  EXPECT_EQ(gpu_->attention(q.gpu, positions.gpu.row_range(0, 1), KvLayerView{kd.gpu, vd.gpu, positions.gpu, {}},
                            count.gpu, bad, out.gpu)
                .code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace qrt
