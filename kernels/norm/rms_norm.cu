#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/norm/rms_norm.hpp"

namespace qrt::kernels {
namespace {

// Up to 1024 threads: a decode row of 4096 is then 4 loads per thread per pass, not 16 in a dependent chain (one
// block per row is all the parallelism a single token has).
constexpr int kMaxThreads = 1024;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // rows beyond this are covered by the grid-stride loop

// One block per row. The sum of squares is complete (block_sum ends in __syncthreads) before any thread writes,
// and each thread writes only elements it read itself, so out may be x.
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ weight, int64_t rows, int64_t dim,
                                float eps, float* out) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * dim;
    float* yr = out + row * dim;
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum_sq += xr[i] * xr[i];
    sum_sq = block_sum(sum_sq, scratch);
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * inv_rms * weight[i];
  }
}

}  // namespace

Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
                cudaStream_t stream) {
  if (rows < 0 || dim <= 0) return invalid_argument("rms_norm: shape [" + std::to_string(rows) + ", " +
                                                    std::to_string(dim) + "] needs rows >= 0 and dim > 0");
  if (rows == 0) return ok_status();
  // A multiple of 32 threads (the block reduction needs whole warps), no more than the row has elements.
  const int threads = static_cast<int>(dim < kMaxThreads ? (dim + 31) / 32 * 32 : kMaxThreads);
  const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  rms_norm_kernel<<<blocks, threads, 0, stream>>>(x, weight, rows, dim, eps, out);
  return cuda_launch_status("rms_norm_kernel");
}

}  // namespace qrt::kernels
