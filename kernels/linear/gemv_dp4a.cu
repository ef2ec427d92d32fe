#include "kernels/linear/gemv_dp4a.hpp"

#include <climits>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_dp4a_formats.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"
#include "kernels/linear/gemv_rows_reduce.cuh"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;
// Rows per block for matrices with at least this many rows (2 halves the activation reads per weight).
constexpr int64_t kTallRows = 4096;

struct Dp4aParams {
  const uint8_t* data;
  const uint8_t* w_scales;  // AFQ: [rows, groups_per_row] group scales and biases, scale_bytes each
  const uint8_t* w_biases;
  int64_t groups_per_row;
  int scale_bytes;
  int group_shift;
  int64_t rows;
  int64_t row_bytes;
  int items;  // per row
  int64_t x_blocks;  // 32-column activation blocks per batch row
  const int8_t* codes;
  const float* scales;
  float* y;
};

template <class P, int M, int R>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_kernel(const Dp4aParams p) {
  __shared__ float partial[kThreads / 32][R * M];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  dp4a::RowRef rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(row0 + r, p.rows - 1);  // past the end: a repeat, not stored
    const int64_t group_row = row * p.groups_per_row * p.scale_bytes;
    rows[r] = {p.data + row * p.row_bytes, p.w_scales == nullptr ? nullptr : p.w_scales + group_row,
               p.w_biases == nullptr ? nullptr : p.w_biases + group_row, p.group_shift};
  }

  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int it = static_cast<int>(threadIdx.x); it < p.items; it += kThreads) {
    typename P::W w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = P::fetch(rows[r], it);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const typename P::X x = P::load_x(p.codes + i * p.x_blocks * kQ8BlockCodeBytes,
                                        p.scales + i * p.x_blocks * kQ8BlockScaleFloats, it);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][i] += P::dot(w[r], x, it);
    }
  }

  store_row_sums<kThreads, R, M>(acc, partial, row0, p.rows, p.y);
}

template <class P>
Status launch(const quant::QuantView& w, Q8ConstActivations x, int m, float* y, cudaStream_t stream) {
  const int64_t blocks_per_row = w.cols / P::kBlockCols;
  int64_t groups_per_row = 0;
  int group_shift = 0;
  if (w.params.group_size > 0 && w.scales != nullptr) {
    groups_per_row = w.cols / w.params.group_size;
    while ((1 << group_shift) < w.params.group_size) ++group_shift;
  }
  const int scale_bytes = w.scales == nullptr ? 0 : quant::float_scale_bytes(w.params.scale_type);
  const Dp4aParams params{w.data, w.scales, w.biases, groups_per_row, scale_bytes, group_shift,
                          w.rows, blocks_per_row * P::kBlockBytes,
                          static_cast<int>(blocks_per_row * P::kItemsPerBlock), w.cols / kQ8BlockCols,
                          x.codes, x.scales, y};
  const bool tall = w.rows >= kTallRows;
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    if (tall) {
      gemv_dp4a_kernel<P, M, 2><<<static_cast<unsigned>((w.rows + 1) / 2), kThreads, 0, stream>>>(params);
    } else {
      gemv_dp4a_kernel<P, M, 1><<<static_cast<unsigned>(w.rows), kThreads, 0, stream>>>(params);
    }
    return cuda_launch_status("gemv_dp4a_kernel");
  });
}

// AFQ's scale dtype becomes a template parameter here (gemv_dp4a_applies admitted only these three).
template <int Bits>
Status launch_afq(const quant::QuantView& w, Q8ConstActivations x, int m, float* y, cudaStream_t stream) {
  switch (w.params.scale_type) {
    case quant::ScalarType::kF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kF16>>(w, x, m, y, stream);
    case quant::ScalarType::kBF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kBF16>>(w, x, m, y, stream);
    default: return launch<dp4a::Afq<Bits, quant::ScalarType::kF32>>(w, x, m, y, stream);
  }
}

// Columns per block of the formats that have a policy; 0 for the others.
int64_t policy_block_cols(quant::FormatId format) {
  switch (format) {
    case quant::FormatId::kQ4_0:
    case quant::FormatId::kQ4_1:
    case quant::FormatId::kQ5_0:
    case quant::FormatId::kQ5_1:
    case quant::FormatId::kQ8_0:
    case quant::FormatId::kIQ4_NL:
    case quant::FormatId::kMXFP4_GGML:
    case quant::FormatId::kAFQ4:
    case quant::FormatId::kAFQ8: return 32;
    case quant::FormatId::kQ2_K:
    case quant::FormatId::kQ3_K:
    case quant::FormatId::kQ4_K:
    case quant::FormatId::kQ5_K:
    case quant::FormatId::kQ6_K:
    case quant::FormatId::kIQ4_XS:
    case quant::FormatId::kTQ2_0:
    case quant::FormatId::kIQ2_XXS:
    case quant::FormatId::kIQ2_XS:
    case quant::FormatId::kIQ2_S:
    case quant::FormatId::kIQ3_XXS:
    case quant::FormatId::kIQ3_S:
    case quant::FormatId::kIQ1_S:
    case quant::FormatId::kIQ1_M:
    case quant::FormatId::kTQ1_0: return 256;
    default: return 0;
  }
}

}  // namespace

bool gemv_dp4a_applies(quant::FormatId format, const quant::QuantView& w) {
  const int64_t block_cols = policy_block_cols(format);
  if (block_cols == 0) return false;
  if (w.data == nullptr || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.rows <= 0 || w.rows >= INT_MAX || w.cols <= 0 || w.cols % block_cols != 0) return false;
  if (format == quant::FormatId::kAFQ4 || format == quant::FormatId::kAFQ8) {
    const int g = w.params.group_size;
    const quant::ScalarType st = w.params.scale_type;
    if ((g != 32 && g != 64 && g != 128) || w.cols % g != 0 || w.scales == nullptr || w.biases == nullptr) return false;
    if (st != quant::ScalarType::kF16 && st != quant::ScalarType::kBF16 && st != quant::ScalarType::kF32) return false;
    const uintptr_t align = static_cast<uintptr_t>(quant::float_scale_bytes(st));
    if (reinterpret_cast<uintptr_t>(w.scales) % align != 0 || reinterpret_cast<uintptr_t>(w.biases) % align != 0)
      return false;
  }
  return w.cols / 8 < INT_MAX;  // items per row fit an int (8 columns per item at the least)
}

Status gemv_dp4a(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m, float* y,
                 cudaStream_t stream) {
  const std::string name = "gemv_dp4a " + std::string(quant::format_name(format));
  if (m < 1 || m > kGemvMaxBatch)
    return invalid_argument(name + ": batch " + std::to_string(m) + " not in 1.." + std::to_string(kGemvMaxBatch));
  if (!gemv_dp4a_applies(format, w))
    return invalid_argument(name + ": no integer-dot kernel for [" + std::to_string(w.rows) + ", " +
                            std::to_string(w.cols) + "] at this alignment (check gemv_dp4a_applies first)");
  if (x.codes == nullptr || x.scales == nullptr || y == nullptr) return invalid_argument(name + ": null pointer");
  switch (format) {
    case quant::FormatId::kQ4_0: return launch<dp4a::Q4_0>(w, x, m, y, stream);
    case quant::FormatId::kQ4_1: return launch<dp4a::Q4_1>(w, x, m, y, stream);
    case quant::FormatId::kQ5_0: return launch<dp4a::Q5_0>(w, x, m, y, stream);
    case quant::FormatId::kQ5_1: return launch<dp4a::Q5_1>(w, x, m, y, stream);
    case quant::FormatId::kQ8_0: return launch<dp4a::Q8_0>(w, x, m, y, stream);
    case quant::FormatId::kQ2_K: return launch<dp4a::Q2K>(w, x, m, y, stream);
    case quant::FormatId::kQ3_K: return launch<dp4a::Q3K>(w, x, m, y, stream);
    case quant::FormatId::kQ4_K: return launch<dp4a::Q4K>(w, x, m, y, stream);
    case quant::FormatId::kQ5_K: return launch<dp4a::Q5K>(w, x, m, y, stream);
    case quant::FormatId::kQ6_K: return launch<dp4a::Q6K>(w, x, m, y, stream);
    case quant::FormatId::kIQ4_NL: return launch<dp4a::Iq4Nl>(w, x, m, y, stream);
    case quant::FormatId::kIQ4_XS: return launch<dp4a::Iq4Xs>(w, x, m, y, stream);
    case quant::FormatId::kTQ2_0: return launch<dp4a::Tq2>(w, x, m, y, stream);
    case quant::FormatId::kIQ2_XXS: return launch<dp4a::Iq2Xxs>(w, x, m, y, stream);
    case quant::FormatId::kIQ2_XS: return launch<dp4a::Iq2Xs>(w, x, m, y, stream);
    case quant::FormatId::kIQ2_S: return launch<dp4a::Iq2S>(w, x, m, y, stream);
    case quant::FormatId::kIQ3_XXS: return launch<dp4a::Iq3Xxs>(w, x, m, y, stream);
    case quant::FormatId::kIQ3_S: return launch<dp4a::Iq3S>(w, x, m, y, stream);
    case quant::FormatId::kIQ1_S: return launch<dp4a::Iq1S>(w, x, m, y, stream);
    case quant::FormatId::kIQ1_M: return launch<dp4a::Iq1M>(w, x, m, y, stream);
    case quant::FormatId::kTQ1_0: return launch<dp4a::Tq1>(w, x, m, y, stream);
    case quant::FormatId::kMXFP4_GGML: return launch<dp4a::Mxfp4Ggml>(w, x, m, y, stream);
    case quant::FormatId::kAFQ4: return launch_afq<4>(w, x, m, y, stream);
    case quant::FormatId::kAFQ8: return launch_afq<8>(w, x, m, y, stream);
    default: return invalid_argument(name + ": no policy");  // unreachable: gemv_dp4a_applies checked
  }
}

}  // namespace qrt::kernels
