#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/q8_warp.cuh"
#include "kernels/norm/rms_norm.hpp"

namespace qrt::kernels {
namespace {

// Up to 1024 threads: a decode row of 4096 is then 4 loads per thread per pass, not 16 in a dependent chain (one
// block per row is all the parallelism a single token has).
constexpr int kMaxThreads = 1024;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // rows beyond this are covered by the grid-stride loop

// Rows up to kMaxThreads * kRegisterElements wide keep their elements and weights in registers between the two
// passes: the second pass then issues no loads, where re-reading x and the weight cost a decode token one memory
// round trip per element a thread holds (the stores before each re-read kept the compiler from hoisting them).
constexpr int kRegisterElements = 8;

// One block per row. The sum of squares is complete (block_sum ends in __syncthreads) before any thread writes
// out, and each thread writes only elements it read itself, so out may be x. Element u of a thread is
// threadIdx.x + u * blockDim.x: the sum of squares adds a thread's elements in increasing order either way.
// With q8.codes set (dim a multiple of 32), each warp also quantizes the 32 consecutive outputs it writes for the
// integer-dot GEMV that reads them next: the warp's lanes cover one activation block per pass.
// kAdd (add_rms_norm): x += delta first, in the pass that sums the squares; the values and the order of every sum
// are those of add_kernel followed by this kernel without kAdd.
// kInRegisters: dim <= blockDim.x * kRegisterElements (else the second pass re-reads x and the weight).
// __launch_bounds__: a block of 1024 threads may use at most 64 registers each (the register version would take 80).
template <bool kAdd, bool kInRegisters>
__global__ void __launch_bounds__(kMaxThreads) rms_norm_kernel(float* x, const float* __restrict__ delta, const float* __restrict__ weight,
                                int64_t rows, int64_t dim, float eps, float* out, Q8Activations q8) {
  __shared__ float scratch[32];
  allow_next_grid();
  wait_for_previous_grid();  // x and delta come from the kernels before (programmatic_launch.cuh)
  constexpr int kHeld = kInRegisters ? kRegisterElements : 1;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float* xr = x + row * dim;
    float* yr = out + row * dim;
    float held[kHeld], w[kHeld];
    float sum_sq = 0.0f;
    if constexpr (kInRegisters) {
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
        held[u] = i < dim ? xr[i] + (kAdd ? delta[row * dim + i] : 0.0f) : 0.0f;
        w[u] = i < dim ? weight[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
        if (i >= dim) break;
        if constexpr (kAdd) xr[i] = held[u];
        sum_sq += held[u] * held[u];
      }
    } else {
      for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i];
        if constexpr (kAdd) {
          v = v + delta[row * dim + i];
          xr[i] = v;
        }
        sum_sq += v * v;
      }
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
    auto emit = [&](int64_t i, float y) {
      yr[i] = y;
      if (q8.codes != nullptr) {
        const int64_t block = (row * dim + i) / kQ8BlockCols;
        quantize_q8_warp(y, static_cast<int>(i % kQ8BlockCols), q8.codes + block * kQ8BlockCodeBytes,
                         q8.scales + block * kQ8BlockScaleFloats);
      }
    };
    if constexpr (kInRegisters) {
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
        if (i >= dim) break;  // the same for the whole warp when dim is a multiple of 32 (q8 output)
        emit(i, held[u] * inv_rms * w[u]);
      }
    } else {
      for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) emit(i, xr[i] * inv_rms * weight[i]);
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
  auto launch = [&](auto kernel) {
    return launch_programmatic("rms_norm_kernel", kernel, blocks, threads, 0, stream, x, delta, weight, rows, dim, eps,
                               out, q8);
  };
  const bool in_registers = dim <= int64_t{threads} * kRegisterElements;
  if (delta != nullptr) return launch(in_registers ? rms_norm_kernel<true, true> : rms_norm_kernel<true, false>);
  return launch(in_registers ? rms_norm_kernel<false, true> : rms_norm_kernel<false, false>);
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
