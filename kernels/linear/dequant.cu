#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/dequant.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;

// One thread per decode block (row r, block b), decoding straight into its slot of out. Bytes moved: the packed
// rows once, rows * cols * 4 written. A first version: each thread writes block_elems consecutive floats, so the
// stores are not coalesced across a warp; the prefill GEMM that follows dominates.
template <class Traits>
__global__ void decode_rows_kernel(quant::QuantView w, const int32_t* __restrict__ row_ids, int64_t first_row,
                                   int64_t rows, float* __restrict__ out) {
  const int be = quant::block_elems_for(Traits::block_elems, w.params);
  const int64_t blocks_per_row = w.cols / be;
  const int64_t n = rows * blocks_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t r = idx / blocks_per_row;
    const int64_t b = idx % blocks_per_row;
    const int64_t src = row_ids != nullptr ? static_cast<int64_t>(row_ids[r]) : first_row + r;
    float* dst = out + r * w.cols + b * be;
    if (src < 0 || src >= w.rows) {
      for (int j = 0; j < be; ++j) dst[j] = __int_as_float(0x7fc00000);  // quiet NaN marks a bad id
      continue;
    }
    Traits::decode_block(w, src, b, dst);
  }
}

Status check_view(const quant::QuantView& w, int be, const char* op) {
  if (w.rows <= 0 || w.cols <= 0 || w.data == nullptr)
    return invalid_argument(std::string(op) + ": empty weight view");
  if (be <= 0 || w.cols % be != 0)
    return invalid_argument(std::string(op) + ": row length " + std::to_string(w.cols) +
                            " is not a whole number of blocks of " + std::to_string(be));
  return ok_status();
}

Status launch(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t first_row,
              int64_t rows, float* out, cudaStream_t stream, const char* op) {
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, w.params);
    QRT_TRY(check_view(w, be, op));
    if (rows == 0) return ok_status();
    const int64_t n = rows * (w.cols / be);
    decode_rows_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(w, row_ids, first_row, rows, out);
    return cuda_launch_status("decode_rows_kernel");
  });
}

}  // namespace

Status dequantize_rows(quant::FormatId format, const quant::QuantView& w, int64_t first_row, int64_t rows,
                       float* out, cudaStream_t stream) {
  if (first_row < 0 || rows < 0 || first_row + rows > w.rows)
    return out_of_range("dequantize_rows: rows [" + std::to_string(first_row) + ", " +
                        std::to_string(first_row + rows) + ") outside a matrix of " + std::to_string(w.rows) + " rows");
  return launch(format, w, nullptr, first_row, rows, out, stream, "dequantize_rows");
}

Status gather_rows(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t rows,
                   float* out, cudaStream_t stream) {
  if (rows < 0) return invalid_argument("gather_rows: negative row count");
  if (rows > 0 && row_ids == nullptr) return invalid_argument("gather_rows: no row ids");
  return launch(format, w, row_ids, 0, rows, out, stream, "gather_rows");
}

}  // namespace qrt::kernels
