#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/elementwise/add.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may be a or b. Each element is read and written by the same thread.
__global__ void add_kernel(const float* a, const float* b, int64_t n, float* out) {
  allow_next_grid();
  wait_for_previous_grid();  // every input is an earlier kernel's (programmatic_launch.cuh)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = a[i] + b[i];
}

__global__ void scale_kernel(const float* x, float s, int64_t n, float* out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = x[i] * s;
}

// tanhf (not a fast approximation): the result stays within a few ulp of the CPU reference's double tanh.
__global__ void softcap_kernel(const float* x, float cap, int64_t n, float* out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = cap * tanhf(x[i] / cap);
}

__global__ void add_indexed_rows_kernel(float* y, const float* __restrict__ table, int64_t table_rows,
                                        const int32_t* __restrict__ ids, int64_t rows, int64_t cols) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = ids[i / cols];
    if (id >= 0 && id < table_rows) y[i] += table[id * cols + i % cols];
  }
}

__global__ void add_bias_rows_kernel(float* y, const float* __restrict__ bias, int64_t rows, int64_t cols) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] += bias[i % cols];
}

__global__ void gather_rows_kernel(const float* __restrict__ x, int64_t x_rows, int64_t cols,
                                   const int32_t* __restrict__ rows, int64_t k, float* __restrict__ out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t n = k * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = rows[i / cols];
    if (r >= 0 && r < x_rows) out[i] = x[r * cols + i % cols];
  }
}

// One thread per output element.
__global__ void concat_cols_kernel(const float* __restrict__ a, int64_t a_cols, const float* __restrict__ b,
                                   int64_t b_cols, int64_t n, float* __restrict__ out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t cols = a_cols + b_cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t r = idx / cols, c = idx % cols;
    out[idx] = c < a_cols ? a[r * a_cols + c] : b[r * b_cols + c - a_cols];
  }
}

}  // namespace

Status add_indexed_rows(float* y, const float* table, int64_t table_rows, const int32_t* ids, int64_t rows,
                        int64_t cols, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || table_rows < 0) return invalid_argument("add_indexed_rows: negative shape");
  if (rows == 0 || cols == 0) return ok_status();
  return launch_programmatic("add_indexed_rows_kernel", add_indexed_rows_kernel, grid_for(rows * cols, kThreads),
                             kThreads, 0, stream, y, table, table_rows, ids, rows, cols);
}

Status scale(const float* x, float s, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("scale: negative length " + std::to_string(n));
  if (n == 0) return ok_status();
  return launch_programmatic("scale_kernel", scale_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, s, n, out);
}

Status softcap(const float* x, float cap, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("softcap: negative length " + std::to_string(n));
  if (!(cap > 0.0f)) return invalid_argument("softcap: the cap must be positive");
  if (n == 0) return ok_status();
  return launch_programmatic("softcap_kernel", softcap_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, cap, n,
                             out);
}

Status gather_rows(const float* x, int64_t x_rows, int64_t cols, const int32_t* rows, int64_t k, float* out,
                   cudaStream_t stream) {
  if (x_rows < 0 || cols < 0 || k < 0) return invalid_argument("gather_rows: negative shape");
  if (k == 0 || cols == 0) return ok_status();
  return launch_programmatic("gather_rows_kernel", gather_rows_kernel, grid_for(k * cols, kThreads), kThreads, 0,
                             stream, x, x_rows, cols, rows, k, out);
}

Status add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("add: negative length " + std::to_string(n));
  if (n == 0) return ok_status();
  return launch_programmatic("add_kernel", add_kernel, grid_for(n, kThreads), kThreads, 0, stream, a, b, n, out);
}

Status concat_cols(const float* a, int64_t a_cols, const float* b, int64_t b_cols, int64_t rows, float* out,
                   cudaStream_t stream) {
  if (rows < 0 || a_cols < 0 || b_cols < 0) return invalid_argument("concat_cols: negative shape");
  const int64_t cols = a_cols + b_cols, n = rows * cols;
  if (n == 0) return ok_status();
  return launch_programmatic("concat_cols_kernel", concat_cols_kernel, grid_for(n, kThreads), kThreads, 0, stream, a,
                             a_cols, b, b_cols, n, out);
}

Status add_bias_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows < 0 || cols < 0) return invalid_argument("add_bias_rows: negative shape");
  if (rows == 0 || cols == 0) return ok_status();
  return launch_programmatic("add_bias_rows_kernel", add_bias_rows_kernel, grid_for(rows * cols, kThreads), kThreads,
                             0, stream, y, bias, rows, cols);
}

}  // namespace qrt::kernels
