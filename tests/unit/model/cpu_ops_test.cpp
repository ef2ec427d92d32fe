// The CPU reference ops: properties that pin each op down independently of how it is written (layout
// equivalences, masking, routing order), plus small hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/ops.hpp"
#include "test_support.hpp"

namespace qrt::cpu {
namespace {

TEST(CpuOps, RmsNormHandValue) {
  const float x[2] = {3.0f, 4.0f}, w[2] = {1.0f, 2.0f};
  float out[2];
  rms_norm(x, w, 1, 2, 0.0f, out);
  const double rms = std::sqrt(12.5);
  EXPECT_NEAR(out[0], 3.0 / rms, 1e-6);
  EXPECT_NEAR(out[1], 8.0 / rms, 1e-6);
}

TEST(CpuOps, RopeLayoutsAgreeUnderThePairPermutation) {
  // Half-split pairs (i, i + rot/2) become interleaved pairs (2i, 2i+1) after the GGUF permutation, so rotating
  // permuted vectors with the interleaved layout equals permuting the half-split result.
  const int heads = 3, hd = 8, rot = 8, tokens = 2;
  const int32_t pos[tokens] = {5, 11};
  const float inv_freq[4] = {1.0f, 0.3f, 0.05f, 0.001f};
  auto x = test::random_normal(tokens * heads * hd, 3);
  std::vector<float> permuted(x.size());
  for (int t = 0; t < tokens * heads; ++t)
    for (int i = 0; i < rot / 2; ++i) {
      permuted[t * hd + 2 * i] = x[t * hd + i];
      permuted[t * hd + 2 * i + 1] = x[t * hd + i + rot / 2];
    }
  rope(x.data(), tokens, heads, hd, rot, pos, inv_freq, 1.0f, false);
  rope(permuted.data(), tokens, heads, hd, rot, pos, inv_freq, 1.0f, true);
  for (int t = 0; t < tokens * heads; ++t)
    for (int i = 0; i < rot / 2; ++i) {
      EXPECT_NEAR(permuted[t * hd + 2 * i], x[t * hd + i], 1e-6);
      EXPECT_NEAR(permuted[t * hd + 2 * i + 1], x[t * hd + i + rot / 2], 1e-6);
    }
}

TEST(CpuOps, RopeRotatesPairsAndLeavesTheTail) {
  const int hd = 6, rot = 4;
  const int32_t pos[1] = {2};
  const float inv_freq[2] = {0.5f, 0.25f};
  float x[hd] = {1, 0, 0, 1, 7, 8};
  rope(x, 1, 1, hd, rot, pos, inv_freq, 2.0f, false);
  // Pair 0 = (x0, x2) = (1, 0) turned by 1 rad, scaled by 2; pair 1 = (x1, x3) = (0, 1) turned by 0.5 rad.
  EXPECT_NEAR(x[0], 2 * std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[2], 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[1], -2 * std::sin(0.5), 1e-6);
  EXPECT_NEAR(x[3], 2 * std::cos(0.5), 1e-6);
  EXPECT_EQ(x[4], 7.0f);
  EXPECT_EQ(x[5], 8.0f);
}

TEST(CpuOps, AttentionMasksByPositionAndWindowAndSharesKvHeads) {
  const int hd = 4, heads = 4, kv_heads = 2, keys = 5;
  auto q = test::random_normal(heads * hd, 1);
  auto k = test::random_normal(keys * kv_heads * hd, 2);
  auto v = test::random_normal(keys * kv_heads * hd, 3);
  const int32_t key_pos[keys] = {0, 1, 2, 3, 9};  // the last key is in the future
  const int32_t q_pos[1] = {3};
  AttentionShape s{heads, kv_heads, hd, 0.5f, 0};
  std::vector<float> out(heads * hd), ref(heads * hd);
  attention(q.data(), q_pos, 1, k.data(), v.data(), key_pos, keys, s, out.data());
  // Reference: explicit softmax over the 4 visible keys; query head h reads kv head h / 2.
  for (int h = 0; h < heads; ++h) {
    const int g = h / 2;
    double w[4], sum = 0;
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += q[h * hd + d] * k[(j * kv_heads + g) * hd + d];
      w[j] = std::exp(0.5 * dot);
      sum += w[j];
    }
    for (int d = 0; d < hd; ++d) {
      double acc = 0;
      for (int j = 0; j < 4; ++j) acc += w[j] / sum * v[(j * kv_heads + g) * hd + d];
      EXPECT_NEAR(out[h * hd + d], acc, 1e-5) << "head " << h;
    }
  }
  // Window 1: only the key at the query's own position is visible, so the output is its value row.
  s.sliding_window = 1;
  attention(q.data(), q_pos, 1, k.data(), v.data(), key_pos, keys, s, out.data());
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[h * hd + d], v[(3 * kv_heads + h / 2) * hd + d], 1e-6);
  // No visible key: zeros.
  const int32_t early[1] = {-1};
  attention(q.data(), early, 1, k.data(), v.data(), key_pos, keys, s, out.data());
  for (float o : out) EXPECT_EQ(o, 0.0f);
}

TEST(CpuOps, MoeRouteTopKOrderTiesAndRenormalization) {
  // Token 0: distinct logits; token 1: a tie between experts 1 and 3 for the second place.
  const float logits[2 * 4] = {0.1f, 2.0f, -1.0f, 1.0f, 3.0f, 1.0f, 0.0f, 1.0f};
  int32_t ids[4];
  float w[4];
  moe_route(logits, 2, 4, 2, false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  const double z0 = std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(w[1], std::exp(1.0) / z0, 1e-6);
  EXPECT_EQ(ids[2], 0);
  EXPECT_EQ(ids[3], 1);  // the tie goes to the lower id
  moe_route(logits, 2, 4, 2, true, ids, w);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  EXPECT_NEAR(w[0] / w[1], std::exp(1.0), 1e-5);
}

TEST(CpuOps, MoeCombineSiluMulSoftmax) {
  const float y[2 * 3] = {1, 2, 3, 10, 20, 30};
  const float w[2] = {0.25f, 0.75f};
  float out[3];
  moe_combine(y, w, 1, 2, 3, out);
  EXPECT_FLOAT_EQ(out[0], 7.75f);
  EXPECT_FLOAT_EQ(out[2], 23.25f);
  const float g[3] = {0.0f, 1.0f, -30.0f}, u[3] = {5.0f, 2.0f, 1.0f};
  float s[3];
  silu_mul(g, u, 3, s);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_NEAR(s[1], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(s[2], 0.0, 1e-11);
  float x[3] = {1000.0f, 1000.0f, 0.0f};  // large values must not overflow
  softmax(x, 3);
  EXPECT_NEAR(x[0], 0.5, 1e-6);
  EXPECT_EQ(x[2], 0.0f);
}

}  // namespace
}  // namespace qrt::cpu
