// The shared op shape rules (op_checks) decide exactly as the CPU backend does: for valid memory and a set of
// good and bad shapes per op, both give the same error code. Also the CUDA factory's answer in this build.
#include <gtest/gtest.h>

#include <list>
#include <tuple>

#include "backend/cpu_backend.hpp"
#include "backend/make_cuda_backend.hpp"
#include "backend/op_checks.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

class OpChecks : public testing::Test {
 protected:
  template <class T>
  DeviceView<T> alloc(int64_t rows, int64_t cols) {
    auto buf = allocate_scoped(cpu_, static_cast<uint64_t>(rows * cols) * sizeof(T));
    EXPECT_TRUE(buf.ok());
    keep_.push_back(std::move(buf).value());
    auto v = keep_.back().view<T>(rows, cols);
    // Values the CPU ops can run on: random floats, small ids and positions.
    for (int64_t i = 0; i < rows * cols; ++i) {
      if constexpr (std::is_same_v<T, float>) v.data[i] = static_cast<float>((i * 37) % 11) * 0.1f - 0.5f;
      else v.data[i] = static_cast<T>(i % 2);
    }
    return v;
  }
  WeightHandle weight(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage_.emplace_back(test::random_normal(static_cast<size_t>(n), 5));
    QuantTensor t;
    t.name = "w";
    t.shape = shape;
    t.data = {reinterpret_cast<const uint8_t*>(storage_.back().data()), static_cast<uint64_t>(n) * 4};
    auto h = cpu_.upload_weight(t);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    return *h;
  }
  WeightInfo info(WeightHandle h) { return *cpu_.weight_info(h); }
  // The CPU backend and the shared rule agree on ok / error code.
  void expect_same(const Status& cpu, const Status& shared, const char* what) {
    EXPECT_EQ(cpu.code(), shared.code()) << what << ": cpu says '" << cpu.to_string() << "', op_checks says '"
                                         << shared.to_string() << "'";
  }

  CpuBackend cpu_;
  std::vector<ScopedBuffer> keep_;
  std::list<std::vector<float>> storage_;
};

TEST_F(OpChecks, LinearAndEmbedAgreeWithCpuBackend) {
  const WeightHandle w = weight({8, 32}), bias = weight({8}), wrong_bias = weight({7});
  auto x = alloc<float>(3, 32);
  auto y = alloc<float>(3, 8);
  for (auto [xv, yv, b, name] :
       {std::tuple{x, y, bias, "good"}, std::tuple{x.reshaped(6, 16), y, bias, "x cols"},
        std::tuple{x, y.reshaped(1, 24), bias, "y shape"}, std::tuple{x, y, wrong_bias, "bias size"},
        std::tuple{x, F32View{x.data, 3, 8}, WeightHandle{}, "y overlaps x"}}) {
    WeightInfo bi;
    if (b.valid()) bi = info(b);
    expect_same(cpu_.linear(xv, w, b, yv), op_checks::linear(xv, info(w), b.valid() ? &bi : nullptr, yv), name);
  }
  const WeightHandle table = weight({5, 32});
  auto ids = alloc<int32_t>(3, 1);
  expect_same(cpu_.embed(table, ids, x), op_checks::embed(info(table), ids, x), "embed good");
  expect_same(cpu_.embed(table, ids.reshaped(1, 3), x), op_checks::embed(info(table), ids.reshaped(1, 3), x),
              "embed ids shape");
  const WeightHandle narrow = weight({5, 16});
  expect_same(cpu_.embed(narrow, ids, x), op_checks::embed(info(narrow), ids, x), "embed dim");
}

TEST_F(OpChecks, ElementwiseNormAndRopeAgreeWithCpuBackend) {
  auto a = alloc<float>(4, 16), b = alloc<float>(4, 16), out = alloc<float>(4, 16);
  expect_same(cpu_.add(a, b, out), op_checks::same_shape3("add", "a", a, "b", b, out), "add good");
  expect_same(cpu_.add(a, b.reshaped(8, 8), out), op_checks::same_shape3("add", "a", a, "b", b.reshaped(8, 8), out),
              "add shape");
  expect_same(cpu_.silu_mul(a, b, out.reshaped(2, 32)),
              op_checks::same_shape3("silu_mul", "gate", a, "up", b, out.reshaped(2, 32)), "silu shape");
  const WeightHandle norm = weight({16}), norm_bad = weight({8});
  expect_same(cpu_.rms_norm(a, norm, 1e-5f, a), op_checks::rms_norm(a, info(norm), a), "rms in place");
  expect_same(cpu_.rms_norm(a, norm_bad, 1e-5f, out), op_checks::rms_norm(a, info(norm_bad), out), "rms weight");
  const F32View shifted{a.data + 1, 3, 16};
  expect_same(cpu_.rms_norm(a.row_range(0, 3), norm, 1e-5f, shifted),
              op_checks::rms_norm(a.row_range(0, 3), info(norm), shifted), "rms partial overlap");

  auto pos = alloc<int32_t>(4, 1);
  auto inv = alloc<float>(2, 1);
  for (int rot : {4, 5, 10, 0}) {
    for (int heads : {2, 3}) {
      RopeParams rp{RopeLayout::kInterleaved, 8, rot, 1.0f, inv};
      expect_same(cpu_.rope(a, heads, pos, rp), op_checks::rope(a, heads, pos, rp), "rope");
    }
  }
}

TEST_F(OpChecks, AttentionKvAndMoeAgreeWithCpuBackend) {
  auto kc = alloc<float>(6, 16), vc = alloc<float>(6, 16);
  auto kpos = alloc<int32_t>(6, 1);
  const KvLayerView cache{kc, vc, kpos, {}};
  auto k = alloc<float>(2, 16);
  auto positions = alloc<int32_t>(2, 1);
  // Shapes through op_checks::kv_write, slot values (which a GPU cannot report) through op_checks::kv_slots.
  for (int32_t first : {0, 4, 5, -1}) {
    auto slots = alloc<int32_t>(2, 1);
    slots.data[0] = first;
    slots.data[1] = first + 1;
    Status expected = op_checks::kv_write(cache, slots, positions, k, k);
    if (expected.ok()) expected = op_checks::kv_slots(cache, slots.data, slots.rows);
    expect_same(cpu_.kv_write(cache, slots, positions, k, k), expected, "kv_write");
  }
  auto one_slot = alloc<int32_t>(1, 1);
  expect_same(cpu_.kv_write(cache, one_slot, positions, k, k), op_checks::kv_write(cache, one_slot, positions, k, k),
              "kv_write slots shape");
  auto q = alloc<float>(2, 32), out = alloc<float>(2, 32);
  auto qpos = alloc<int32_t>(2, 1);
  auto keys = alloc<int32_t>(1, 1);
  for (int kv_heads : {2, 3, 4}) {
    for (int32_t count : {0, 6, 7}) {
      keys.data[0] = count;
      const AttentionParams ap{4, kv_heads, 8, 0.35f, 0};
      Status expected = op_checks::attention(q, qpos, cache, keys, ap, out);
      if (expected.ok()) expected = op_checks::key_count(cache, count);
      expect_same(cpu_.attention(q, qpos, cache, keys, ap, out), expected, "attention");
    }
  }
  const AttentionParams ap{4, 2, 8, 0.35f, 2};
  keys.data[0] = 3;
  expect_same(cpu_.attention(q, qpos, cache, keys, ap, q), op_checks::attention(q, qpos, cache, keys, ap, q),
              "attention out overlaps q");
  auto two_counts = alloc<int32_t>(2, 1);
  expect_same(cpu_.attention(q, qpos, cache, two_counts, ap, out),
              op_checks::attention(q, qpos, cache, two_counts, ap, out), "attention keys shape");

  auto logits = alloc<float>(3, 4);
  for (int top_k : {1, 4, 5}) {
    auto ids = alloc<int32_t>(3, top_k);
    auto w = alloc<float>(3, top_k);
    expect_same(cpu_.moe_route(logits, true, ids, w), op_checks::moe_route(logits, ids, w), "moe_route");
  }
  auto ids = alloc<int32_t>(3, 2);
  auto weights = alloc<float>(3, 2);
  auto y = alloc<float>(6, 16), combined = alloc<float>(3, 16);
  expect_same(cpu_.moe_combine(y, weights, combined), op_checks::moe_combine(y, weights, combined), "combine");
  expect_same(cpu_.moe_combine(y.row_range(0, 5), weights, combined),
              op_checks::moe_combine(y.row_range(0, 5), weights, combined), "combine rows");
  const WeightHandle experts = weight({4, 8, 16});
  auto xe = alloc<float>(3, 16), ye = alloc<float>(6, 8);
  auto slot_x = alloc<float>(6, 16);
  expect_same(cpu_.linear_experts(xe, experts, ids, ye), op_checks::linear_experts(xe, info(experts), ids, ye),
              "experts shared input");
  expect_same(cpu_.linear_experts(slot_x, experts, ids, ye),
              op_checks::linear_experts(slot_x, info(experts), ids, ye), "experts per-slot input");
  expect_same(cpu_.linear_experts(xe.row_range(0, 2), experts, ids, ye),
              op_checks::linear_experts(xe.row_range(0, 2), info(experts), ids, ye), "experts x rows");
  const WeightHandle matrix = weight({8, 16});
  expect_same(cpu_.linear_experts(xe, matrix, ids, ye), op_checks::linear_experts(xe, info(matrix), ids, ye),
              "experts 2-D weight");
}

TEST(OpChecksArgmax, ShapesAndOverlap) {
  float logits[6] = {};
  int32_t ids[2] = {};
  EXPECT_TRUE(op_checks::argmax(ConstF32View{logits, 2, 3}, I32View{ids, 2, 1}).ok());
  EXPECT_EQ(op_checks::argmax(ConstF32View{logits, 2, 3}, I32View{ids, 1, 2}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(op_checks::argmax(ConstF32View{logits, 2, 0}, I32View{ids, 2, 1}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(op_checks::argmax(ConstF32View{logits, 2, 3}, I32View{reinterpret_cast<int32_t*>(logits), 2, 1}).code(),
            ErrorCode::kInvalidArgument);
  // The CPU backend does not implement it and says so.
  CpuBackend cpu;
  EXPECT_EQ(cpu.argmax(ConstF32View{logits, 2, 3}, I32View{ids, 2, 1}).code(), ErrorCode::kUnsupported);
}

TEST(CudaFactory, AnswersInEveryBuild) {
  auto backend = make_cuda_backend(0);
  if (!cuda_backend_built()) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(backend.status().message().find("cuda"), std::string::npos) << backend.status().message();
  } else {
    std::string why;
    if (!test::cuda_device_available(&why)) {
      ASSERT_FALSE(backend.ok()) << "no usable device, yet the backend opened";
      EXPECT_FALSE(backend.status().message().empty());
    } else {
      ASSERT_TRUE(backend.ok()) << backend.status().to_string();
      EXPECT_EQ((*backend)->name(), "cuda:0");
    }
  }
  // A device index that cannot exist is an error in every build, never a crash.
  EXPECT_FALSE(make_cuda_backend(-1).ok());
  EXPECT_FALSE(make_cuda_backend(1 << 20).ok());
}

}  // namespace
}  // namespace qrt
