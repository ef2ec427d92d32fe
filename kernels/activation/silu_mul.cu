#include "kernels/activation/silu_mul.hpp"

#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/q8_warp.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

enum class Gate { kSilu, kGeluTanh, kSwigluClamped };

// gpt-oss's parameters (kSwigluClamped only).
struct Clamp {
  float alpha = 0.0f;
  float limit = 0.0f;
};

// No __restrict__: out may be gate or up. expf and tanhf (not the fast intrinsics) keep the result within a few ulp
// of the reference. For g -> -inf, expf(-g) = inf and g / inf = -0, as in the reference.
// With q8.codes set (n a multiple of 32, rows of a multiple of 32 columns), each warp also quantizes the 32
// consecutive outputs it writes for the down projection's integer-dot GEMV (a warp-stride step covers one block).
template <Gate kGate>
__global__ void gated_kernel(const float* gate, const float* up, int64_t n, float* out, Q8Activations q8,
                             Clamp clamp) {
  allow_next_grid();
  wait_for_previous_grid();  // gate and up come from the GEMV before (programmatic_launch.cuh)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = gate[i];
    float a;
    float u = up[i];
    if constexpr (kGate == Gate::kSilu) {
      a = g / (1.0f + expf(-g));
    } else if constexpr (kGate == Gate::kGeluTanh) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      a = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    } else {
      const float gc = fminf(g, clamp.limit);
      a = gc / (1.0f + expf(-clamp.alpha * gc));
      u = fminf(fmaxf(u, -clamp.limit), clamp.limit) + 1.0f;
    }
    const float y = a * u;
    out[i] = y;
    if (q8.codes != nullptr) {
      const int64_t block = i / kQ8BlockCols;
      quantize_q8_warp(y, static_cast<int>(i % kQ8BlockCols), q8.codes + block * kQ8BlockCodeBytes,
                       q8.scales + block * kQ8BlockScaleFloats);
    }
  }
}

template <Gate kGate>
Status launch_gated(const char* op, const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream,
                    Q8Activations q8, Clamp clamp = {}) {
  if (n < 0) return invalid_argument(std::string(op) + ": negative length " + std::to_string(n));
  if (q8.codes != nullptr && (n % kQ8BlockCols != 0 || q8.scales == nullptr))
    return invalid_argument(std::string(op) + ": quantized output needs a length that is a multiple of 32 (got " +
                            std::to_string(n) + ") and both arrays");
  if (n == 0) return ok_status();
  return launch_programmatic(op, gated_kernel<kGate>, grid_for(n, kThreads), kThreads, 0, stream, gate, up, n, out, q8,
                             clamp);
}

}  // namespace

Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream, Q8Activations q8) {
  return launch_gated<Gate::kSilu>("silu_mul", gate, up, n, out, stream, q8);
}

Status gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream,
                     Q8Activations q8) {
  return launch_gated<Gate::kGeluTanh>("gelu_tanh_mul", gate, up, n, out, stream, q8);
}

Status swiglu_clamped_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                          cudaStream_t stream, Q8Activations q8) {
  return launch_gated<Gate::kSwigluClamped>("swiglu_clamped_mul", gate, up, n, out, stream, q8, Clamp{alpha, limit});
}

}  // namespace qrt::kernels
