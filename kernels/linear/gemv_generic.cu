#include "kernels/cuda/cuda_check.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_generic.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kMaxBatch = kGemvMaxBatch;
constexpr int kWarpsPerBlock = 4;

// One warp per output row; lanes stride over the row's blocks, decode each into registers and accumulate in
// fp32 against every batch row; a warp shuffle reduces. Bytes moved: the packed row once plus x (cached).
template <class Traits, int M>
__global__ void gemv_generic_kernel(quant::QuantView w, const float* __restrict__ x, float* __restrict__ y) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= w.rows) return;
  constexpr int kFixed = Traits::block_elems;
  const int be = quant::block_elems_for(kFixed, w.params);
  const int64_t nblocks = w.cols / be;
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;
  float buf[kFixed != 0 ? kFixed : quant::kMaxBlockElems];
  for (int64_t b = lane; b < nblocks; b += 32) {
    Traits::decode_block(w, row, b, buf);
    for (int j = 0; j < be; ++j) {
      const int64_t col = b * be + j;
#pragma unroll
      for (int i = 0; i < M; ++i) acc[i] += buf[j] * x[i * w.cols + col];
    }
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float v = acc[i];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) y[i * w.rows + row] = v;
  }
}

template <class Traits, int M>
Status launch(const quant::QuantView& w, const float* x, float* y, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  gemv_generic_kernel<Traits, M><<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, x, y);
  return cuda_launch_status("gemv_generic_kernel");
}

}  // namespace

Status gemv_generic(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y,
                    cudaStream_t stream) {
  if (m < 1 || m > kMaxBatch) return invalid_argument("gemv_generic: batch " + std::to_string(m) + " not in 1..8");
  if (w.rows <= 0 || w.cols <= 0) return invalid_argument("gemv_generic: empty weight");
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    return with_batch(m, [&](auto batch) -> Status { return launch<T, decltype(batch)::value>(w, x, y, stream); });
  });
}

}  // namespace qrt::kernels
