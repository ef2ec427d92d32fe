// The fast GEMV kernels' lane arithmetic (kernels/linear/gemv_lanes*.hpp) run on the CPU, one lane after another in
// exactly the order the CUDA kernel (gemv_staged.cuh) schedules it: per warp of kRows rows and per chunk, stage the
// chunk's packed bytes, prepare() on all 32 lanes, compute() on all 32 lanes; then sum the lanes. Compared with the
// CPU reference (cpu::matmul, double accumulation over the formats' own decode_block) on quantizer output and on
// random code bytes, for every batch size 1..8 and shapes that end inside a chunk, inside a tile, or are one block.
// This checks every lane-to-column mapping, the bit tricks (PRMT tables, magic-number conversions) and the scale
// handling without a GPU; tests/gpu/gemv_fast runs the same cases through the real kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "gemv_test_weights.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/linear/gemv_lanes_dense.hpp"
#include "kernels/linear/gemv_lanes_fp8.hpp"
#include "kernels/linear/gemv_lanes_ggml.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;
namespace gl = kernels::gemv_lanes;

// y: [m, rows], NaN where nothing was written.
template <class P, int M>
std::vector<float> emulate_kernel(const QuantView& w, const float* x) {
  constexpr int R = P::kRows;
  constexpr int CB = gl::chunk_bytes<P>();
  const int64_t row_bytes = gl::packed_row_bytes<P>(w.cols);
  std::vector<uint8_t> stage(static_cast<size_t>(R * CB));
  std::vector<float> scratch(static_cast<size_t>(std::max(P::kScratchFloats, 4)));
  const gl::GroupLayout groups = gl::group_layout<P>(w);
  std::vector<float> y(static_cast<size_t>(M * w.rows), std::numeric_limits<float>::quiet_NaN());
  for (int64_t row0 = 0; row0 < w.rows; row0 += R) {
    const int valid = static_cast<int>(std::min<int64_t>(R, w.rows - row0));
    std::vector<float> acc(static_cast<size_t>(gl::kWarpLanes * R * M), 0.0f);
    for (int c = 0; c < gl::chunk_count<P>(w.cols); ++c) {
      std::fill(stage.begin(), stage.end(), uint8_t{0xA5});  // bytes past the chunk's end are stale on the GPU
      std::fill(scratch.begin(), scratch.end(), std::numeric_limits<float>::quiet_NaN());
      const int bytes = gl::bytes_in_chunk<P>(w.cols, c);
      for (int r = 0; r < R; ++r) {
        const int64_t row = row0 + std::min(r, valid - 1);
        std::memcpy(stage.data() + r * CB, w.data + row * row_bytes + static_cast<int64_t>(c) * CB,
                    static_cast<size_t>(bytes));
      }
      gl::ChunkArgs a;
      a.stage = stage.data();
      a.scratch = scratch.data();
      a.col0 = static_cast<int64_t>(c) * gl::chunk_cols<P>();
      a.x = x + a.col0;
      a.x_stride = w.cols;
      a.cols = gl::cols_in_chunk<P>(w.cols, c);
      a.row0 = row0;
      a.valid_rows = valid;
      a.scales = w.scales;
      a.biases = w.biases;
      a.groups_per_row = groups.groups_per_row;
      a.group_shift = groups.group_shift;
      a.global_scale = w.params.global_scale;
      if (P::kHasPrepare)
        for (int lane = 0; lane < gl::kWarpLanes; ++lane) P::prepare(a, lane);
      for (int lane = 0; lane < gl::kWarpLanes; ++lane) {
        float lane_acc[R][M];
        std::memcpy(lane_acc, acc.data() + lane * R * M, sizeof(lane_acc));
        P::template compute<M>(a, lane, lane_acc);
        std::memcpy(acc.data() + lane * R * M, lane_acc, sizeof(lane_acc));
      }
    }
    for (int r = 0; r < valid; ++r)
      for (int i = 0; i < M; ++i) {
        float sum = 0.0f;
        for (int lane = 0; lane < gl::kWarpLanes; ++lane) sum += acc[static_cast<size_t>((lane * R + r) * M + i)];
        y[static_cast<size_t>(i * w.rows + row0 + r)] = sum;
      }
  }
  return y;
}

struct LaneCase {
  FormatId id;
  int64_t rows;
  int64_t cols;
  int group_size;      // AFQ only
  ScalarType scale_type;  // AFQ only
};

void PrintTo(const LaneCase& c, std::ostream* os) {
  *os << format_name(c.id) << " [" << c.rows << ", " << c.cols << "]";
  if (format_info(c.id).block_elems == 0) *os << " group " << c.group_size << " " << scalar_type_name(c.scale_type);
}

std::string case_name(const testing::TestParamInfo<LaneCase>& info) {
  const LaneCase& c = info.param;
  std::string s = std::string(format_name(c.id)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (format_info(c.id).block_elems == 0)
    s += "_g" + std::to_string(c.group_size) + "_" + std::string(scalar_type_name(c.scale_type));
  else if (c.scale_type != ScalarType::kF32)
    s += "_" + std::string(scalar_type_name(c.scale_type));
  return s;
}

// Calls fn(std::integral_constant<ScalarType, t>{}) for the scale dtypes the AFQ policies are built for.
template <class Fn>
decltype(auto) with_scale_type(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::kF16: return fn(std::integral_constant<ScalarType, ScalarType::kF16>{});
    case ScalarType::kBF16: return fn(std::integral_constant<ScalarType, ScalarType::kBF16>{});
    default: return fn(std::integral_constant<ScalarType, ScalarType::kF32>{});
  }
}

bool has_lane_policy(FormatId id) {
  return dispatch_format(id, [](auto tag) {
    return !std::is_void_v<typename gl::LanePolicy<decltype(tag)::id, ScalarType::kF32>::type>;
  });
}

// Runs the emulation of the lane policy that serves `c.id` (and its scale dtype) for batch m.
std::vector<float> emulate(const LaneCase& c, const QuantView& w, const float* x, int m) {
  return dispatch_format(c.id, [&](auto tag) {
    return with_scale_type(c.scale_type, [&](auto scale) {
      return kernels::with_batch(m, [&](auto batch) -> std::vector<float> {
        using P = typename gl::LanePolicy<decltype(tag)::id, decltype(scale)::value>::type;
        if constexpr (std::is_void_v<P>) {
          ADD_FAILURE() << "no lane policy for " << format_name(c.id);
          return {};
        } else {
          return emulate_kernel<P, decltype(batch)::value>(w, x);
        }
      });
    });
  });
}

class GemvLanes : public testing::TestWithParam<LaneCase> {};

TEST_P(GemvLanes, MatchesCpuReference) {
  const LaneCase& c = GetParam();
  const QuantParams p = test::gemv_test_params(c.id, c.group_size, c.scale_type);
  for (test::WeightKind kind : {test::WeightKind::kQuantized, test::WeightKind::kRandomBytes}) {
    const uint64_t seed = static_cast<uint64_t>(c.rows * 131 + c.cols) + (kind == test::WeightKind::kQuantized ? 0 : 7);
    auto q = test::make_test_weights(c.id, c.rows, c.cols, p, kind, seed);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const QuantView w = cpu::view_of(*q, c.rows, c.cols, p);
    for (int m = 1; m <= kernels::kGemvMaxBatch; ++m) {
      const std::vector<float> x = test::random_normal(static_cast<size_t>(m * c.cols), seed + 100 + m);
      std::vector<float> ref(static_cast<size_t>(m * c.rows));
      ASSERT_TRUE(cpu::matmul(c.id, w, x.data(), m, ref.data()).ok());
      const std::vector<float> got = emulate(c, w, x.data(), m);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t k = 0; k < got.size(); ++k)
        ASSERT_TRUE(std::isfinite(got[k])) << "output " << k << " not written or not finite (" << got[k] << ")";
      EXPECT_LT(test::relative_l2(got.data(), ref.data(), got.size()), 1e-5)
          << test::weight_kind_name(kind) << " weights, batch " << m;
    }
  }
}

std::vector<LaneCase> lane_cases() {
  std::vector<LaneCase> cases;
  for (FormatId id : kAllFormats) {
    if (!has_lane_policy(id)) continue;
    const FormatInfo info = format_info(id);
    if (info.block_elems == 0) {
      // Group-scaled (AFQ): one group; a row ending inside a tile; every group size and scale dtype; long rows.
      for (int g : {32, 64, 128})
        for (ScalarType st : {ScalarType::kF16, ScalarType::kBF16, ScalarType::kF32}) {
          cases.push_back({id, 5, g, g, st});
          cases.push_back({id, 7, 1024 + 3 * g, g, st});
        }
      cases.push_back({id, 6, 4096, 64, ScalarType::kBF16});
      continue;
    }
    if (info.family != Family::kGgml)  // bit-stream formats (MXFP4): rows may end inside a tile or a chunk
      for (int64_t cols : {32, 96, 288, 1056}) cases.push_back({id, 5, cols, 0, ScalarType::kF32});
    if (id == FormatId::kFP8_BLOCK)  // rows in two 128-row tiles of scales, the last tile partial
      for (ScalarType st : {ScalarType::kF16, ScalarType::kBF16, ScalarType::kF32})
        cases.push_back({id, 133, 384 + 32, 0, st});
    // One tile; tiles ending inside a chunk (chunks are 2-8 tiles); several chunks; rows not a multiple of kRows.
    cases.push_back({id, 5, 256, 0, ScalarType::kF32});
    cases.push_back({id, 6, 256 * 5, 0, ScalarType::kF32});
    cases.push_back({id, 3, 256 * 9, 0, ScalarType::kF32});
    cases.push_back({id, 9, 4096, 0, ScalarType::kF32});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Policies, GemvLanes, testing::ValuesIn(lane_cases()), case_name);

// The E2M1 decoder against the scalar one for every code in every position.
TEST(GemvLanesBits, E2m1TableMatchesScalarDecoder) {
  for (uint32_t codes = 0; codes < 0x10000u; ++codes) {
    float got[4];
    gl::e2m1x4_to_floats_x2(codes | 0xABCD0000u, got);  // the upper half must be ignored
    for (int n = 0; n < 4; ++n) {
      const float want = 2.0f * e2m1_to_f32((codes >> (4 * n)) & 0xFu);
      ASSERT_EQ(got[n], want) << "codes " << codes << " position " << n;
    }
  }
}

// PRMT emulation: sign replication and selection, checked against hand-computed values.
TEST(GemvLanesBits, PrmtEmulation) {
  EXPECT_EQ(gl::prmt(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(gl::prmt(0x33221100u, 0x77665544u, 0x0123u), 0x00112233u);
  EXPECT_EQ(gl::prmt(0x000080FFu, 0x0u, 0x8889u), 0xFFFFFFFFu);  // replicate the top bit of byte 1 (0x80)
  EXPECT_EQ(gl::prmt(0x0000007Fu, 0x0u, 0x0008u), 0x7F7F7F00u);  // byte 0 = 0x7F: top bit clear; others copy
  float v[4];
  gl::bytes_to_floats(0xFF80017Fu, gl::kMagic + 128.0f, v);
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[1], -127.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[3], 127.0f);
}

}  // namespace
}  // namespace qrt
