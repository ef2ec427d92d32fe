// The CPU backend: weight upload checks, every op's shape and bounds checks (an error, never a crash), and the
// stacked-expert projection against one 2-D linear per expert, for packed formats.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/quant_reference.hpp"
#include "backend/cpu_backend.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

struct OwnedTensor {
  QuantTensor tensor;
  quant::QuantBuffers buffers;
};

// Quantizes `values` ([matrices * rows, cols]) matrix by matrix into a tensor of `shape`.
OwnedTensor make_tensor(quant::FormatId format, std::vector<int64_t> shape, const std::vector<float>& values,
                        quant::QuantParams params = {}) {
  OwnedTensor o;
  const int64_t cols = shape.back(), rows = shape[shape.size() - 2];
  const int64_t matrices = shape.size() == 3 ? shape[0] : 1;
  for (int64_t m = 0; m < matrices; ++m) {
    auto q = cpu::quantize(format, values.data() + m * rows * cols, rows, cols, params);
    EXPECT_TRUE(q.ok()) << q.status().to_string();
    o.buffers.data.insert(o.buffers.data.end(), q->data.begin(), q->data.end());
    o.buffers.scales.insert(o.buffers.scales.end(), q->scales.begin(), q->scales.end());
    o.buffers.biases.insert(o.buffers.biases.end(), q->biases.begin(), q->biases.end());
  }
  o.tensor.name = "w";
  o.tensor.format = format;
  o.tensor.shape = std::move(shape);
  o.tensor.params = params;
  o.tensor.data = {o.buffers.data.data(), o.buffers.data.size()};
  if (!o.buffers.scales.empty()) o.tensor.scales = {o.buffers.scales.data(), o.buffers.scales.size()};
  if (!o.buffers.biases.empty()) o.tensor.biases = {o.buffers.biases.data(), o.buffers.biases.size()};
  return o;
}

template <class T>
DeviceView<T> alloc(CpuBackend& b, int64_t rows, int64_t cols, std::vector<ScopedBuffer>* keep) {
  auto buf = allocate_scoped(b, static_cast<uint64_t>(rows * cols) * sizeof(T));
  EXPECT_TRUE(buf.ok());
  keep->push_back(std::move(buf).value());
  return keep->back().view<T>(rows, cols);
}

TEST(CpuBackend, LinearExpertsEqualsPerExpertLinear) {
  // Q8_0 (row-separable blocks) and HQQ4 (groups strided over each whole expert matrix): a stacked tensor is
  // experts packed one after another, and only the selected experts are read.
  struct Case {
    quant::FormatId format;
    quant::QuantParams params;
  };
  quant::QuantParams hqq;
  hqq.group_size = 64;
  for (const Case& c : {Case{quant::FormatId::kQ8_0, {}}, Case{quant::FormatId::kHQQ4, hqq}}) {
    CpuBackend b;
    std::vector<ScopedBuffer> keep;
    const int64_t experts = 3, out = 16, in = 64, tokens = 4, top_k = 2;
    const auto w = test::random_normal(experts * out * in, 11);
    auto stacked = make_tensor(c.format, {experts, out, in}, w, c.params);
    auto hs = b.upload_weight(stacked.tensor);
    ASSERT_TRUE(hs.ok()) << hs.status().to_string();
    auto x = alloc<float>(b, tokens, in, &keep);
    const auto xv = test::random_normal(tokens * in, 12);
    ASSERT_TRUE(b.upload(xv.data(), x.data, xv.size() * 4).ok());
    auto ids = alloc<int32_t>(b, tokens, top_k, &keep);
    const int32_t idv[] = {2, 0, 1, 2, 0, 1, 2, 1};
    ASSERT_TRUE(b.upload(idv, ids.data, sizeof(idv)).ok());
    auto y = alloc<float>(b, tokens * top_k, out, &keep);
    ASSERT_TRUE(b.linear_experts(x, *hs, ids, y).ok());
    // Per-slot inputs: row t * top_k + s.
    auto x2 = alloc<float>(b, tokens * top_k, in, &keep);
    const auto x2v = test::random_normal(tokens * top_k * in, 13);
    ASSERT_TRUE(b.upload(x2v.data(), x2.data, x2v.size() * 4).ok());
    auto y2 = alloc<float>(b, tokens * top_k, out, &keep);
    ASSERT_TRUE(b.linear_experts(x2, *hs, ids, y2).ok());
    for (int64_t e = 0; e < experts; ++e) {
      std::vector<float> we(w.begin() + e * out * in, w.begin() + (e + 1) * out * in);
      auto single = make_tensor(c.format, {out, in}, we, c.params);
      auto he = b.upload_weight(single.tensor);
      ASSERT_TRUE(he.ok());
      auto ye = alloc<float>(b, tokens, out, &keep);
      auto ye2 = alloc<float>(b, tokens * top_k, out, &keep);
      ASSERT_TRUE(b.linear(x, *he, WeightHandle{}, ye).ok());
      ASSERT_TRUE(b.linear(x2, *he, WeightHandle{}, ye2).ok());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t s = 0; s < top_k; ++s) {
          if (idv[t * top_k + s] != e) continue;
          for (int64_t o = 0; o < out; ++o) {
            EXPECT_FLOAT_EQ(y.data[(t * top_k + s) * out + o], ye.data[t * out + o]);
            EXPECT_FLOAT_EQ(y2.data[(t * top_k + s) * out + o], ye2.data[(t * top_k + s) * out + o]);
          }
        }
    }
    // An expert id the device would see out of range is an error here.
    const int32_t bad = 3;
    ASSERT_TRUE(b.upload(&bad, ids.data, 4).ok());
    EXPECT_EQ(b.linear_experts(x, *hs, ids, y).code(), ErrorCode::kOutOfRange);
  }
}

TEST(CpuBackend, UploadChecksShapeAndPartSizes) {
  CpuBackend b;
  const auto v = test::random_normal(4 * 64, 1);
  auto t = make_tensor(quant::FormatId::kQ8_0, {4, 64}, v);
  t.tensor.data.size -= 1;
  auto r = b.upload_weight(t.tensor);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFormatError);
  EXPECT_NE(r.status().message().find("needs 272 bytes of data, found 271"), std::string::npos) << r.status().message();
  t.tensor.data.size += 1;
  t.tensor.shape = {4, 2, 4, 8};
  EXPECT_EQ(b.upload_weight(t.tensor).status().code(), ErrorCode::kInvalidArgument);
  t.tensor.shape = {4, 0};
  EXPECT_EQ(b.upload_weight(t.tensor).status().code(), ErrorCode::kInvalidArgument);
  t.tensor.shape = {8, 32};  // same bytes, legal
  EXPECT_TRUE(b.upload_weight(t.tensor).ok());
  t.tensor.shape = {16, 16};  // rows not a multiple of the block
  EXPECT_FALSE(b.upload_weight(t.tensor).ok());
}

TEST(CpuBackend, OpsRejectBadShapesAndForeignMemory) {
  CpuBackend b;
  std::vector<ScopedBuffer> keep;
  const auto v = test::random_normal(8 * 32, 1);
  auto wt = make_tensor(quant::FormatId::kF32, {8, 32}, v);
  auto w = b.upload_weight(wt.tensor);
  ASSERT_TRUE(w.ok());
  auto x = alloc<float>(b, 2, 32, &keep);
  auto y = alloc<float>(b, 2, 8, &keep);
  std::memset(x.data, 0, 2 * 32 * 4);
  EXPECT_TRUE(b.linear(x, *w, WeightHandle{}, y).ok());
  EXPECT_EQ(b.linear(x.reshaped(4, 16), *w, WeightHandle{}, y).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(b.linear(x, *w, WeightHandle{}, y.reshaped(1, 16)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(b.linear(x, *w, *w, y).code(), ErrorCode::kInvalidArgument);  // a matrix is not a bias
  // A view running past its allocation, and memory that is not the backend's.
  EXPECT_EQ(b.linear(F32View{x.data + 40, 2, 32}, *w, WeightHandle{}, y).code(), ErrorCode::kOutOfRange);
  std::vector<float> host(64);
  EXPECT_EQ(b.linear(ConstF32View{host.data(), 2, 32}, *w, WeightHandle{}, y).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(b.download(host.data(), host.data(), 4).code(), ErrorCode::kOutOfRange);
  // Overlapping output.
  EXPECT_EQ(b.linear(x, *w, WeightHandle{}, F32View{x.data, 2, 8}).code(), ErrorCode::kInvalidArgument);
  // A freed weight handle.
  b.free_weight(*w);
  EXPECT_EQ(b.linear(x, *w, WeightHandle{}, y).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(b.linear(x, WeightHandle{}, WeightHandle{}, y).code(), ErrorCode::kInvalidArgument);

  // embed: ids outside the table.
  auto table_t = make_tensor(quant::FormatId::kQ8_0, {5, 32}, test::random_normal(5 * 32, 2));
  auto table = b.upload_weight(table_t.tensor);
  ASSERT_TRUE(table.ok());
  auto ids = alloc<int32_t>(b, 2, 1, &keep);
  const int32_t good[2] = {4, 0}, bad[2] = {1, 5};
  ASSERT_TRUE(b.upload(good, ids.data, 8).ok());
  ASSERT_TRUE(b.embed(*table, ids, x).ok());
  std::vector<float> decoded(5 * 32);
  ASSERT_TRUE(cpu::dequantize(quant::FormatId::kQ8_0, table_t.tensor.view(), decoded.data()).ok());
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(x.data[i], decoded[4 * 32 + i]);
    EXPECT_EQ(x.data[32 + i], decoded[i]);
  }
  ASSERT_TRUE(b.upload(bad, ids.data, 8).ok());
  EXPECT_EQ(b.embed(*table, ids, x).code(), ErrorCode::kOutOfRange);

  // rope / attention / kv_write parameter checks.
  auto inv = alloc<float>(b, 2, 1, &keep);
  RopeParams rp{RopeLayout::kHalfSplit, 8, 5, 1.0f, inv};
  EXPECT_EQ(b.rope(x, 4, ids, rp).code(), ErrorCode::kInvalidArgument);  // odd rot_dim
  rp.rot_dim = 4;
  EXPECT_TRUE(b.rope(x, 4, ids, rp).ok());
  EXPECT_EQ(b.rope(x, 3, ids, rp).code(), ErrorCode::kInvalidArgument);  // 3 heads of 8 != 32
  auto kc = alloc<float>(b, 4, 16, &keep), vc = alloc<float>(b, 4, 16, &keep);
  auto kpos = alloc<int32_t>(b, 4, 1, &keep);
  KvLayerView cache{kc, vc, kpos, {}};
  auto k = alloc<float>(b, 2, 16, &keep);
  auto slots = alloc<int32_t>(b, 2, 1, &keep), kv_positions = alloc<int32_t>(b, 2, 1, &keep);
  slots.data[0] = 2;
  slots.data[1] = 3;
  kv_positions.data[0] = 7;
  kv_positions.data[1] = 9;
  EXPECT_TRUE(b.kv_write(cache, slots, kv_positions, k, k).ok());
  EXPECT_EQ(kpos.data[2], 7);  // the slots' positions are recorded
  EXPECT_EQ(kpos.data[3], 9);
  EXPECT_EQ(kc.data[3 * 16 + 5], k.data[16 + 5]);
  slots.data[1] = 4;  // past the capacity of 4
  EXPECT_EQ(b.kv_write(cache, slots, kv_positions, k, k).code(), ErrorCode::kOutOfRange);
  slots.data[1] = -1;
  EXPECT_EQ(b.kv_write(cache, slots, kv_positions, k, k).code(), ErrorCode::kOutOfRange);
  AttentionParams ap{4, 2, 8, 0.35f, 0};
  auto out = alloc<float>(b, 2, 32, &keep);
  auto keys = alloc<int32_t>(b, 1, 1, &keep);
  keys.data[0] = 5;
  EXPECT_EQ(b.attention(x, ids, cache, keys, ap, out).code(), ErrorCode::kOutOfRange);
  keys.data[0] = -1;
  EXPECT_EQ(b.attention(x, ids, cache, keys, ap, out).code(), ErrorCode::kOutOfRange);
  keys.data[0] = 4;
  ap.kv_heads = 3;
  EXPECT_EQ(b.attention(x, ids, cache, keys, ap, out).code(), ErrorCode::kInvalidArgument);

  // MoE routing shapes.
  auto logits = alloc<float>(b, 2, 4, &keep);
  auto rid = alloc<int32_t>(b, 2, 5, &keep);
  auto rw = alloc<float>(b, 2, 5, &keep);
  EXPECT_EQ(b.moe_route(logits, true, rid, rw).code(), ErrorCode::kInvalidArgument);  // top_k > experts
}

TEST(CpuBackend, AllocationBookkeeping) {
  CpuBackend b;
  {
    auto a = allocate_scoped(b, 100);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(b.live_allocations(), 1u);
    auto zero = b.allocate(0);
    ASSERT_TRUE(zero.ok());
    EXPECT_EQ(zero->ptr, nullptr);
    b.deallocate(DeviceBuffer{reinterpret_cast<void*>(0x1000), 8});  // foreign: ignored
    EXPECT_EQ(b.live_allocations(), 1u);
  }
  EXPECT_EQ(b.live_allocations(), 0u);
  EXPECT_FALSE(b.allocate(uint64_t{1} << 62).ok());
}

}  // namespace
}  // namespace qrt
