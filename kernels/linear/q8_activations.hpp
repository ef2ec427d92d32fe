// Activations for the integer-dot decode GEMV (gemv_dp4a.hpp): each 32-column block of x as two int8 limbs,
//   x ≈ d_hi · q_hi + d_lo · q_lo,   d_hi = max|x| / 127,  q_hi = rint(x / d_hi),
//                                    d_lo = d_hi / 254,     q_lo = rint((x - d_hi · q_hi) / d_lo),
// so that a weight block's dot product with x is two dp4a chains (one per limb) and a few float multiplies, while x
// keeps about 15 bits: the error per element is at most d_lo / 2 = max|x| / 64516 (relative L2 of a product about
// 2e-5 on random data, against 4e-3 for ggml's single q8_1 limb). The second limb costs one more dp4a per 4 weights
// and 32 more bytes of x per block, read from L1/L2, never DRAM.
//
// Layout of m rows of `cols` columns (cols a multiple of 32), blocks numbered b = 0 .. cols/32 - 1 per row:
//   codes  [m][cols / 32][64] int8: the block's 32 q_hi, then its 32 q_lo
//   scales [m][cols / 32][4]  float: {d_hi, d_lo, sum, sum16}, sum = d_hi · Σ q_hi + d_lo · Σ q_lo (the block's Σ x
//                                    as the limbs hold it, for the formats with offsets or minimums), sum16 the same
//                                    over columns 0..15 (Q2_K's minimums, one per 16 columns, in the tensor-core GEMM)
// A block holding a NaN or an infinity gets d_hi = NaN and zero codes, so every output it touches is NaN.
//
// quantize_q8_block is the one definition of the arithmetic: the CUDA kernel evaluates the same expressions (the
// reductions are a max and integer sums, exact in any order), so the CPU emulation in the tests is bit-exact.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/quant/common.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

constexpr int kQ8BlockCols = 32;
constexpr int kQ8BlockCodeBytes = 2 * kQ8BlockCols;
constexpr int kQ8BlockScaleFloats = 4;

struct Q8Activations {
  int8_t* codes = nullptr;
  float* scales = nullptr;
};
struct Q8ConstActivations {
  const int8_t* codes = nullptr;
  const float* scales = nullptr;
};

// Device bytes for m rows of cols columns (codes, then the 16-byte aligned scales).
inline uint64_t q8_activation_bytes(int64_t m, int64_t cols) {
  const uint64_t blocks = static_cast<uint64_t>(m) * static_cast<uint64_t>(cols / kQ8BlockCols);
  return blocks * (kQ8BlockCodeBytes + 4 * kQ8BlockScaleFloats);
}
// The two arrays carved from `base` (16-byte aligned, q8_activation_bytes(m, cols) long).
inline Q8Activations q8_activations_at(void* base, int64_t m, int64_t cols) {
  const uint64_t blocks = static_cast<uint64_t>(m) * static_cast<uint64_t>(cols / kQ8BlockCols);
  auto* bytes = static_cast<uint8_t*>(base);
  return {reinterpret_cast<int8_t*>(bytes), reinterpret_cast<float*>(bytes + blocks * kQ8BlockCodeBytes)};
}

// The pieces of one block's quantization, as functions of the block's values so that a warp (one value per lane)
// and the host (a loop) compute them identically.
QRT_HD float q8_hi_scale(float amax, bool finite) { return finite ? amax / 127.0f : NAN; }
QRT_HD int q8_code(float v, float d) {
  if (!(d > 0.0f)) return 0;  // an all-zero block, or one with a NaN/infinity (d is NaN)
  const float q = rintf(v / d);
  return static_cast<int>(q < -127.0f ? -127.0f : (q > 127.0f ? 127.0f : q));
}
QRT_HD float q8_residual(float v, float d_hi, int q_hi) { return fmaf(-d_hi, static_cast<float>(q_hi), v); }
QRT_HD float q8_lo_scale(float d_hi) { return d_hi / 254.0f; }
QRT_HD float q8_block_sum(float d_hi, float d_lo, int sum_hi, int sum_lo) {
  return fmaf(d_lo, static_cast<float>(sum_lo), d_hi * static_cast<float>(sum_hi));
}

// One block on the host: x[32] -> codes[64], scales[4].
inline void quantize_q8_block(const float* x, int8_t* codes, float* scales) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < kQ8BlockCols; ++j) {
    finite = finite && std::isfinite(x[j]);
    amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
  }
  const float d_hi = q8_hi_scale(amax, finite);
  const float d_lo = q8_lo_scale(d_hi);
  int sum_hi = 0, sum_lo = 0, half_hi = 0, half_lo = 0;
  for (int j = 0; j < kQ8BlockCols; ++j) {
    const int hi = q8_code(x[j], d_hi);
    const int lo = q8_code(q8_residual(x[j], d_hi, hi), d_lo);
    codes[j] = static_cast<int8_t>(hi);
    codes[kQ8BlockCols + j] = static_cast<int8_t>(lo);
    sum_hi += hi;
    sum_lo += lo;
    if (j == kQ8BlockCols / 2 - 1) {
      half_hi = sum_hi;
      half_lo = sum_lo;
    }
  }
  scales[0] = d_hi;
  scales[1] = d_lo;
  scales[2] = q8_block_sum(d_hi, d_lo, sum_hi, sum_lo);
  scales[3] = q8_block_sum(d_hi, d_lo, half_hi, half_lo);
}

// x [m, cols] fp32 (cols a multiple of 32) into `out` on `stream`.
Status quantize_q8_activations(const float* x, int64_t m, int64_t cols, Q8Activations out, cudaStream_t stream);

}  // namespace qrt::kernels
