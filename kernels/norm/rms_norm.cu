#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/q8_warp.cuh"
#include "kernels/norm/rms_norm.hpp"

namespace qrt::kernels {
namespace {

// Up to 1024 threads: a decode row of 4096 is then 4 loads per thread per pass, not 16 in a dependent chain (one
// block per row is all the parallelism a single token has).
constexpr int kMaxThreads = 1024;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // rows beyond this are covered by the grid-stride loop

// One block per row. The sum of squares is complete (block_sum ends in __syncthreads) before any thread writes,
// and each thread writes only elements it read itself, so out may be x.
// With q8.codes set (dim a multiple of 32), each warp also quantizes the 32 consecutive outputs it writes for the
// integer-dot GEMV that reads them next: the warp's lanes cover one activation block per pass.
// kAdd (add_rms_norm): x += delta first, in the pass that sums the squares; the values and the order of every sum
// are those of add_kernel followed by this kernel without kAdd.
template <bool kAdd>
__global__ void rms_norm_kernel(float* x, const float* __restrict__ delta, const float* __restrict__ weight,
                                int64_t rows, int64_t dim, float eps, float* out, Q8Activations q8) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float* xr = x + row * dim;
    float* yr = out + row * dim;
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float v = xr[i];
      if constexpr (kAdd) {
        v = v + delta[row * dim + i];
        xr[i] = v;
      }
      sum_sq += v * v;
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float y = xr[i] * inv_rms * weight[i];
      yr[i] = y;
      if (q8.codes != nullptr) {
        const int64_t block = (row * dim + i) / kQ8BlockCols;
        quantize_q8_warp(y, static_cast<int>(i % kQ8BlockCols), q8.codes + block * kQ8BlockCodeBytes,
                         q8.scales + block * kQ8BlockScaleFloats);
      }
    }
  }
}

Status launch_rms_norm(float* x, const float* delta, const float* weight, int64_t rows, int64_t dim, float eps,
                       float* out, cudaStream_t stream, Q8Activations q8) {
  if (rows < 0 || dim <= 0) return invalid_argument("rms_norm: shape [" + std::to_string(rows) + ", " +
                                                    std::to_string(dim) + "] needs rows >= 0 and dim > 0");
  if (q8.codes != nullptr && (dim % kQ8BlockCols != 0 || q8.scales == nullptr))
    return invalid_argument("rms_norm: quantized output needs a width that is a multiple of 32 (got " +
                            std::to_string(dim) + ") and both arrays");
  if (rows == 0) return ok_status();
  // A multiple of 32 threads (the block reduction needs whole warps), no more than the row has elements.
  const int threads = static_cast<int>(dim < kMaxThreads ? (dim + 31) / 32 * 32 : kMaxThreads);
  const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  if (delta != nullptr) {
    rms_norm_kernel<true><<<blocks, threads, 0, stream>>>(x, delta, weight, rows, dim, eps, out, q8);
  } else {
    rms_norm_kernel<false><<<blocks, threads, 0, stream>>>(x, nullptr, weight, rows, dim, eps, out, q8);
  }
  return cuda_launch_status("rms_norm_kernel");
}

}  // namespace

Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
                cudaStream_t stream, Q8Activations q8) {
  // Without kAdd the kernel only reads x (the const is cast away for the shared signature).
  return launch_rms_norm(const_cast<float*>(x), nullptr, weight, rows, dim, eps, out, stream, q8);
}

Status add_rms_norm(float* x, const float* delta, const float* weight, int64_t rows, int64_t dim, float eps,
                    float* out, cudaStream_t stream, Q8Activations q8) {
  if (delta == nullptr) return invalid_argument("add_rms_norm: null delta");
  return launch_rms_norm(x, delta, weight, rows, dim, eps, out, stream, q8);
}

}  // namespace qrt::kernels
