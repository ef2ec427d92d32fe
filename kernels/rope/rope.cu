#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/rope/rope.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per rotated pair (token, head, i); the two elements of a pair belong to that thread alone.
__global__ void rope_kernel(float* x, const int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                            RopeShape s) {
  const int half = s.rot_dim / 2;
  const int64_t n = s.tokens * s.heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int i = static_cast<int>(idx % half);
    const int64_t head_row = idx / half;  // t * heads + h
    const int64_t t = head_row / s.heads;
    float* v = x + head_row * s.head_dim;
    const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
    double sn, cs;
    sincos(angle, &sn, &cs);
    const double c = cs * s.attn_factor;
    const double sv = sn * s.attn_factor;
    const int a = s.interleaved ? 2 * i : i;
    const int b = s.interleaved ? 2 * i + 1 : i + half;
    const double x0 = v[a];
    const double x1 = v[b];
    v[a] = static_cast<float>(x0 * c - x1 * sv);
    v[b] = static_cast<float>(x1 * c + x0 * sv);
  }
}

}  // namespace

Status rope(float* x, const int32_t* positions, const float* inv_freq, const RopeShape& s, cudaStream_t stream) {
  if (s.tokens < 0 || s.heads <= 0 || s.head_dim <= 0 || s.rot_dim <= 0 || s.rot_dim % 2 != 0 ||
      s.rot_dim > s.head_dim)
    return invalid_argument("rope: bad shape (tokens " + std::to_string(s.tokens) + ", heads " +
                            std::to_string(s.heads) + ", head_dim " + std::to_string(s.head_dim) + ", rot_dim " +
                            std::to_string(s.rot_dim) + ")");
  const int64_t pairs = s.tokens * s.heads * (s.rot_dim / 2);
  if (pairs == 0) return ok_status();
  rope_kernel<<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(x, positions, inv_freq, s);
  return cuda_launch_status("rope_kernel");
}

}  // namespace qrt::kernels
