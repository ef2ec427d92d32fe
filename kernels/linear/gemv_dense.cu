// Fast decode GEMV for the dense formats F32, F16 and BF16 (the generic kernel reads them one element per lane
// and step). A block of 128 threads owns 1 row (2 from 4096 rows, so x is read once for both); thread t takes the
// row's 8-column items t, t + 128, ...: one 16-byte load of F16/BF16 (two of F32), the matching 8 floats of x per
// batch row (two 16-byte loads, from L1/L2), fp32 FMAs, and the block reduction of gemv_rows_reduce.cuh. A row of
// fewer than 128 items (under 1024 columns) gets the fewest warps that cover them (row_group_lanes: 32 or 64
// threads) as its block, so that no thread idles; the sums are unchanged (the idle threads only added zeros).
// Bytes moved: W once (2 or 4 bytes per weight), x and y once per block from cache. Per 8 weights of BF16 at
// batch 1: 1 + 2 loads, 8 conversions (a shift or mask) and 8 FMAs, about 2.5 instructions per weight for 2 bytes:
// memory-bound with room to spare. Needs W's data and x 16-byte aligned and cols a multiple of 8; else gemv()
// runs the generic kernel.
#include <cuda_fp16.h>

#include <climits>
#include <span>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_parts.cuh"
#include "kernels/linear/gemv_rows_reduce.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kItemCols = 8;
constexpr int64_t kTallRows = 4096;

template <quant::FormatId Id>
__device__ __forceinline__ void load_weights(const uint8_t* row, int it, float (&w)[kItemCols]) {
  if constexpr (Id == quant::FormatId::kF32) {
    const float4* p = reinterpret_cast<const float4*>(row) + 2 * it;
    const float4 a = __ldg(p), b = __ldg(p + 1);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  } else {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(row) + it);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (Id == quant::FormatId::kBF16) {
        w[2 * k] = __uint_as_float(words[k] << 16);
        w[2 * k + 1] = __uint_as_float(words[k] & 0xFFFF0000u);
      } else {
        w[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[k] & 0xFFFFu)));
        w[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[k] >> 16)));
      }
    }
  }
}

// The parts of one launch (gemv_dense_parts).
struct DenseParts {
  GemvPartGrid grid;
  const uint8_t* data[kGemvMaxParts];
  int64_t rows[kGemvMaxParts];
  float* y[kGemvMaxParts];
  int lanes = kThreads;  // threads per block
};

// Thread `lane` of its row group's sums over items lane, lane + stride, ... (stride: the group's threads).
template <quant::FormatId Id, int M, int R>
__device__ __forceinline__ void accumulate_dense(const uint8_t* const (&row_data)[R], const float* __restrict__ x,
                                                 int64_t cols, int lane, int stride, float (&acc)[R][M]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  const int items = static_cast<int>(cols / kItemCols);
#pragma unroll 2
  for (int it = lane; it < items; it += stride) {
    float w[R][kItemCols];
#pragma unroll
    for (int r = 0; r < R; ++r) load_weights<Id>(row_data[r], it, w[r]);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float4* xp = reinterpret_cast<const float4*>(x + i * cols) + 2 * it;
      const float4 a = __ldg(xp), b = __ldg(xp + 1);
      const float xv[kItemCols] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < kItemCols; ++c) acc[r][i] += w[r][c] * xv[c];
    }
  }
}

// Narrow: blocks of p.lanes threads (narrow rows, R = 1), the stride a kernel argument; otherwise of kThreads, the
// stride compile-time. Either way a block owns its rows alone, so their addresses are the block's (uniform registers:
// a per-thread row group index had cost 8-16 registers per thread).
template <quant::FormatId Id, int M, int R, bool Narrow>
__global__ void __launch_bounds__(kThreads) gemv_dense_kernel(const DenseParts p, int64_t cols,
                                                              const float* __restrict__ x) {
  __shared__ float partial[kThreads / 32][R * M];
  constexpr int kElemBytes = Id == quant::FormatId::kF32 ? 4 : 2;
  const int k = gemv_part_of_block(p.grid, static_cast<int64_t>(blockIdx.x));
  const uint8_t* data = gemv_part_value(k, p.data);
  const int64_t rows = gemv_part_value(k, p.rows);
  float* y = gemv_part_value(k, p.y);
  const int lanes = Narrow ? p.lanes : kThreads;
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) - gemv_part_value(k, p.grid.first_block)) * R;
  const uint8_t* row_data[R];
#pragma unroll
  for (int r = 0; r < R; ++r)  // past the end: a repeat, not stored
    row_data[r] = data + min(row0 + r, rows - 1) * cols * kElemBytes;
  // The weights start into L2 before x, the previous kernel's output, is waited for (programmatic_launch.cuh).
  allow_next_grid();
  if (lane == 0 && row0 < rows) {
    const int64_t held = rows - row0 < R ? rows - row0 : R;
    prefetch_to_l2(row_data[0], static_cast<uint64_t>(held * cols * kElemBytes));
  }
  wait_for_previous_grid();
  float acc[R][M];
  accumulate_dense<Id, M, R>(row_data, x, cols, lane, lanes, acc);
  store_row_sums<kThreads, R, M>(acc, partial, row0, rows, y, lanes);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool dense_applies(const quant::QuantView& w, const float* x) {
  return w.data != nullptr && x != nullptr && aligned16(w.data) && aligned16(x) && w.rows > 0 && w.rows < INT_MAX &&
         w.cols > 0 && w.cols % kItemCols == 0 && w.cols / kItemCols < INT_MAX;
}

// The parts share cols (checked by the callers); plan_part_grid gives 2 rows per block when any part is tall (not
// for narrow rows, whose small blocks are many already).
template <quant::FormatId Id>
Status dense_launch(const char* name, std::span<const GemvPart> parts, const float* x, int m, cudaStream_t stream) {
  const int64_t cols = parts[0].w.cols;
  const int lanes = row_group_lanes(cols / kItemCols, kThreads);
  const bool narrow = lanes < kThreads;
  DenseParts p{plan_part_grid(parts, kTallRows, narrow ? 1 : 0), {}, {}, {}, lanes};
  for (size_t j = 0; j < parts.size(); ++j) {
    p.data[j] = parts[j].w.data;
    p.rows[j] = parts[j].w.rows;
    p.y[j] = parts[j].y;
  }
  const unsigned blocks = static_cast<unsigned>(p.grid.blocks);
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    if (narrow)
      return launch_programmatic(name, gemv_dense_kernel<Id, M, 1, true>, blocks, lanes, 0, stream, p, cols, x);
    if (p.grid.rows_per_block == 2)
      return launch_programmatic(name, gemv_dense_kernel<Id, M, 2, false>, blocks, kThreads, 0, stream, p, cols, x);
    return launch_programmatic(name, gemv_dense_kernel<Id, M, 1, false>, blocks, kThreads, 0, stream, p, cols, x);
  });
}

}  // namespace

#define QRT_DENSE_FAST_GEMV(ID)                                                                                  \
  bool FastGemv<quant::FormatId::k##ID>::applies(const quant::QuantView& w, const float* x) {                    \
    return dense_applies(w, x);                                                                                  \
  }                                                                                                              \
  Status FastGemv<quant::FormatId::k##ID>::launch(const quant::QuantView& w, const float* x, int m, float* y,    \
                                                  cudaStream_t stream) {                                         \
    const GemvPart part{w, y};                                                                                   \
    return dense_launch<quant::FormatId::k##ID>(kName.data(), {&part, 1}, x, m, stream);                         \
  }

QRT_DENSE_FAST_GEMV(F32)
QRT_DENSE_FAST_GEMV(F16)
QRT_DENSE_FAST_GEMV(BF16)

#undef QRT_DENSE_FAST_GEMV

bool gemv_dense_parts_apply(quant::FormatId format, std::span<const GemvPart> parts, const float* x) {
  if (format != quant::FormatId::kF32 && format != quant::FormatId::kF16 && format != quant::FormatId::kBF16)
    return false;
  if (parts.empty() || parts.size() > static_cast<size_t>(kGemvMaxParts)) return false;
  int64_t blocks = 0;
  for (const GemvPart& part : parts) {
    if (!dense_applies(part.w, x) || part.w.cols != parts[0].w.cols || part.y == nullptr) return false;
    blocks += part.w.rows;
  }
  return blocks < INT_MAX;
}

Status gemv_dense_parts(quant::FormatId format, std::span<const GemvPart> parts, const float* x, int m,
                        cudaStream_t stream) {
  const std::string name = "gemv_dense_parts " + std::string(quant::format_name(format));
  if (m < 1 || m > kGemvMaxBatch)
    return invalid_argument(name + ": batch " + std::to_string(m) + " not in 1.." + std::to_string(kGemvMaxBatch));
  if (!gemv_dense_parts_apply(format, parts, x))
    return invalid_argument(name + ": needs 1.." + std::to_string(kGemvMaxParts) +
                            " F32/F16/BF16 matrices of one width (a multiple of 8), 16-byte aligned, with outputs");
  switch (format) {
    case quant::FormatId::kF32: return dense_launch<quant::FormatId::kF32>(name.c_str(), parts, x, m, stream);
    case quant::FormatId::kF16: return dense_launch<quant::FormatId::kF16>(name.c_str(), parts, x, m, stream);
    default: return dense_launch<quant::FormatId::kBF16>(name.c_str(), parts, x, m, stream);
  }
}

}  // namespace qrt::kernels
