// Slicing rules for tensor parallelism, checked by value: a legal slice of a packed tensor, dequantized on its
// own, must equal bit for bit the same region of the whole tensor dequantized. Random bytes stand in for every
// part (so formats without a quantizer are covered too); comparing bit patterns keeps NaN payloads honest.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/slicing.hpp"
#include "loader/tensor_slice.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

// A tensor of `format` and `shape` over random bytes, with the buffers that back its spans.
struct RandomTensor {
  QuantTensor tensor;
  std::vector<uint8_t> data, scales, biases;
};

QuantParams params_for(FormatId id) {
  QuantParams p;
  p.group_size = format_info(id).block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  p.global_scale = 0.75f;
  return p;
}

RandomTensor make_random(FormatId id, std::vector<int64_t> shape, uint64_t seed) {
  RandomTensor r;
  r.tensor.name = "blk.0.test.weight";
  r.tensor.format = id;
  r.tensor.shape = std::move(shape);
  r.tensor.params = params_for(id);
  auto sizes = cpu::part_sizes(id, r.tensor.rows(), r.tensor.cols(), r.tensor.params);
  EXPECT_TRUE(sizes.ok()) << sizes.status().to_string();
  r.data = test::random_bytes(sizes->data, seed);
  r.scales = test::random_bytes(sizes->scales, seed + 1);
  r.biases = test::random_bytes(sizes->biases, seed + 2);
  r.tensor.data = {r.data.data(), r.data.size()};
  r.tensor.scales = {r.scales.data(), r.scales.size()};
  r.tensor.biases = {r.biases.data(), r.biases.size()};
  return r;
}

std::vector<float> dequantize(const QuantTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const Status s = cpu::dequantize(t.format, t.view(), out.data());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

// The region `range` of a dequantized tensor of `shape`, row-major.
std::vector<float> region(const std::vector<float>& full, const std::vector<int64_t>& shape, const DimRange& range) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < range.dim; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(range.dim) + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t size = shape[static_cast<size_t>(range.dim)];
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = range.start; i < range.start + range.length; ++i)
      for (int64_t k = 0; k < inner; ++k) out.push_back(full[static_cast<size_t>((o * size + i) * inner + k)]);
  return out;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

// Every legal even share for 2 and 4 ranks plus an uneven offset range (as KV-head replication uses), along each
// dimension; each must dequantize to the matching region.
void check_all_slices(FormatId id, const std::vector<int64_t>& shape, uint64_t seed) {
  RandomTensor r = make_random(id, shape, seed);
  const std::vector<float> full = dequantize(r.tensor);
  int checked = 0;
  for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
    const SliceRule rule = slice_rule(id, r.tensor.params, shape, dim);
    if (!rule.sliceable) {
      EXPECT_FALSE(rule.reason.empty());
      EXPECT_FALSE(slice_tensor(r.tensor, {dim, 0, shape[static_cast<size_t>(dim)]}).ok());
      continue;
    }
    std::vector<DimRange> ranges;
    for (int world : {1, 2, 4})
      for (int rank = 0; rank < world; ++rank) {
        auto share = even_share(dim, shape[static_cast<size_t>(dim)], rank, world);
        if (share.ok() && check_slice(id, r.tensor.params, shape, *share).ok()) ranges.push_back(*share);
      }
    ranges.push_back({dim, rule.alignment, rule.alignment});  // one aligned unit, not at the start
    for (const DimRange& range : ranges) {
      const std::string what = std::string(format_name(id)) + " dim " + std::to_string(dim) + " [" +
                               std::to_string(range.start) + ", +" + std::to_string(range.length) + ")";
      auto sliced = slice_tensor(r.tensor, range);
      ASSERT_TRUE(sliced.ok()) << what << ": " << sliced.status().to_string();
      expect_same_bits(dequantize(sliced->tensor), region(full, shape, range), what);
      ++checked;
    }
  }
  if (format_info(id).family != Family::kHqq) {
    EXPECT_GE(checked, 4) << format_name(id);
  }
}

class EveryFormat : public testing::TestWithParam<FormatId> {};

TEST_P(EveryFormat, MatrixSlicesDequantizeToTheSameRegion) {
  const FormatId id = GetParam();
  // Block FP8 gets a shape with a partial edge tile in both dimensions; 1024 columns hold whole blocks of every
  // other format (256-element super-blocks included).
  const std::vector<int64_t> shape = id == FormatId::kFP8_BLOCK ? std::vector<int64_t>{300, 320}
                                                                : std::vector<int64_t>{12, 1024};
  check_all_slices(id, shape, 100 + static_cast<uint64_t>(id));
}

TEST_P(EveryFormat, ExpertStackSlicesDequantizeToTheSameRegion) {
  const FormatId id = GetParam();
  if (id == FormatId::kFP8_BLOCK) {
    RandomTensor r = make_random(id, {2, 256, 256}, 5);
    EXPECT_FALSE(slice_tensor(r.tensor, {1, 0, 128}).ok()) << "block FP8 tiles are 2-D only";
    return;
  }
  check_all_slices(id, {4, 8, 512}, 300 + static_cast<uint64_t>(id));
}

INSTANTIATE_TEST_SUITE_P(Formats, EveryFormat, testing::ValuesIn(kAllFormats), test::format_test_name);

TEST(Slicing, RowSlicesOfAMatrixAreZeroCopy) {
  RandomTensor r = make_random(FormatId::kQ4_K, {8, 512}, 1);
  auto s = slice_tensor(r.tensor, {0, 4, 4});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->storage.empty());
  EXPECT_EQ(s->tensor.data.data, r.data.data() + 4 * 2 * 144);  // 4 rows of two 144-byte super-blocks
  EXPECT_EQ(s->tensor.data.size, 4u * 2 * 144);
}

TEST(Slicing, ColumnSliceByteRunsOfQ4_0AndAfq) {
  // Q4_0 [2, 128]: 4 blocks of 18 bytes a row; columns [32, 96) are blocks 1 and 2 of each row.
  const std::vector<int64_t> shape{2, 128};
  auto q = slice_bytes(FormatId::kQ4_0, {}, shape, {1, 32, 64});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->data.offset, 18u);
  EXPECT_EQ(q->data.length, 36u);
  EXPECT_EQ(q->data.stride, 72u);
  EXPECT_EQ(q->data.count, 2u);
  EXPECT_EQ(q->scales.count, 0u);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 64}));
  // AFQ3, group 32, F16 scales [3, 256]: 96 bytes of codes and 8 scales a row; columns [64, 160) = groups 2..4.
  QuantParams p;
  p.group_size = 32;
  p.scale_type = ScalarType::kF16;
  auto a = slice_bytes(FormatId::kAFQ3, p, std::vector<int64_t>{3, 256}, {1, 64, 96});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->data.offset, 24u);
  EXPECT_EQ(a->data.length, 36u);
  EXPECT_EQ(a->data.stride, 96u);
  EXPECT_EQ(a->scales.offset, 4u);
  EXPECT_EQ(a->scales.length, 6u);
  EXPECT_EQ(a->scales.stride, 16u);
  EXPECT_EQ(a->biases.count, 3u);
}

TEST(Slicing, MisalignedInputSliceNamesTheRule) {
  // The spec's example: an 11008-wide down projection in Q4_K cannot be split in two (5504 is not a multiple
  // of 256).
  auto share = even_share(1, 11008, 1, 2);
  ASSERT_TRUE(share.ok());
  const Status s = check_slice(FormatId::kQ4_K, {}, std::vector<int64_t>{4096, 11008}, *share);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q4_k"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("[4096, 11008]"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("multiples of 256"), std::string::npos) << s.to_string();
  // The same split of the output dimension is fine.
  EXPECT_TRUE(check_slice(FormatId::kQ4_K, {}, std::vector<int64_t>{11008, 4096}, {0, 5504, 5504}).ok());
}

TEST(Slicing, RefusesBadRanges) {
  const std::vector<int64_t> shape{8, 256};
  EXPECT_FALSE(check_slice(FormatId::kF32, {}, shape, {2, 0, 1}).ok());    // no such dimension
  EXPECT_FALSE(check_slice(FormatId::kF32, {}, shape, {0, 6, 4}).ok());    // runs past the end
  EXPECT_FALSE(check_slice(FormatId::kF32, {}, shape, {0, 2, 0}).ok());    // empty
  EXPECT_FALSE(check_slice(FormatId::kF32, {}, shape, {0, -1, 2}).ok());   // negative start
  EXPECT_FALSE(check_slice(FormatId::kQ8_0, {}, shape, {1, 16, 32}).ok());  // starts inside a block
  EXPECT_FALSE(even_share(0, 10, 0, 4).ok());
  EXPECT_FALSE(even_share(0, 8, 4, 4).ok());
  // F8Q8 rows that are not whole 33-byte blocks cannot be sliced at all.
  const SliceRule f8q8 = slice_rule(FormatId::kF8Q8, {}, std::vector<int64_t>{4, 40}, 0);
  EXPECT_FALSE(f8q8.sliceable);
  EXPECT_NE(f8q8.reason.find("flattened"), std::string::npos);
}

TEST(Slicing, SpansShorterThanTheSliceAreAnError) {
  RandomTensor r = make_random(FormatId::kQ8_0, {4, 64}, 9);
  r.tensor.data.size -= 1;  // a truncated file
  auto s = slice_tensor(r.tensor, {1, 32, 32});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().to_string().find("blk.0.test.weight"), std::string::npos) << s.status().to_string();
}

}  // namespace
}  // namespace qrt
