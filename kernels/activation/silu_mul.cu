#include "kernels/activation/silu_mul.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may be gate or up. expf (not __expf) keeps the result within a few ulp of the reference.
// For g -> -inf, expf(-g) = inf and g / inf = -0, as in the reference.
__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

}  // namespace

Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("silu_mul: negative length " + std::to_string(n));
  if (n == 0) return ok_status();
  silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
  return cuda_launch_status("silu_mul_kernel");
}

}  // namespace qrt::kernels
