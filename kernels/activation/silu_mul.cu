#include "kernels/activation/silu_mul.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/q8_warp.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may be gate or up. expf (not __expf) keeps the result within a few ulp of the reference.
// For g -> -inf, expf(-g) = inf and g / inf = -0, as in the reference.
// With q8.codes set (n a multiple of 32, rows of a multiple of 32 columns), each warp also quantizes the 32
// consecutive outputs it writes for the down projection's integer-dot GEMV (a warp-stride step covers one block).
__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out, Q8Activations q8) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = gate[i];
    const float y = g / (1.0f + expf(-g)) * up[i];
    out[i] = y;
    if (q8.codes != nullptr) {
      const int64_t block = i / kQ8BlockCols;
      quantize_q8_warp(y, static_cast<int>(i % kQ8BlockCols), q8.codes + block * kQ8BlockCodeBytes,
                       q8.scales + block * kQ8BlockScaleFloats);
    }
  }
}

}  // namespace

Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream, Q8Activations q8) {
  if (n < 0) return invalid_argument("silu_mul: negative length " + std::to_string(n));
  if (q8.codes != nullptr && (n % kQ8BlockCols != 0 || q8.scales == nullptr))
    return invalid_argument("silu_mul: quantized output needs a length that is a multiple of 32 (got " +
                            std::to_string(n) + ") and both arrays");
  if (n == 0) return ok_status();
  silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out, q8);
  return cuda_launch_status("silu_mul_kernel");
}

}  // namespace qrt::kernels
