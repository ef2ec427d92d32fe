#include <cuda_fp16.h>
#include <mma.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/linear/gemm_dequant_tc.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kRows = 64;    // rows of W per block: 16 per warp
constexpr int kTokens = 64;  // rows of x per block
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// grid (row tiles, token tiles). Warp w owns W rows [16 w, 16 w + 16) of the tile and all 64 tokens: four 16x16
// accumulators that live across the chunks. Per chunk of `chunk` columns:
//   1. the threads decode (row, block) pairs of the tile's W rows into w_s as fp16 (rows past the matrix are zeros)
//      and round the tile's x rows into x_s (tokens past n are zeros);
//   2. each warp multiplies its 16 W rows with the 64 tokens (x_s read as the column-major B = xᵀ).
// The accumulators go through shared memory to y, transposed ([token][row]) and bounded.
template <class Traits>
__global__ void __launch_bounds__(kThreads) gemm_dequant_tc_kernel(quant::QuantView w, const float* __restrict__ x,
                                                                  int64_t n, float* __restrict__ y, int chunk) {
  extern __shared__ __align__(128) unsigned char smem[];
  __half* w_s = reinterpret_cast<__half*>(smem);               // [kRows][chunk]
  __half* x_s = w_s + kRows * chunk;                           // [kTokens][chunk]
  float* d_s = reinterpret_cast<float*>(x_s + kTokens * chunk);  // [kRows][kTokens]
  const int tid = threadIdx.x, warp = tid / 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows, t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  constexpr int kFixed = Traits::block_elems;
  const int be = quant::block_elems_for(kFixed, w.params);
  const int blocks_per_chunk = chunk / be;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kTokens / 16];
  for (auto& a : acc) wmma::fill_fragment(a, 0.0f);
  float buf[kFixed != 0 ? kFixed : quant::kMaxBlockElems];
  for (int64_t k0 = 0; k0 < w.cols; k0 += chunk) {
    for (int task = tid; task < kRows * blocks_per_chunk; task += kThreads) {
      const int r = task / blocks_per_chunk, b = task % blocks_per_chunk;
      __half* dst = w_s + r * chunk + b * be;
      if (r0 + r < w.rows) {
        Traits::decode_block(w, r0 + r, k0 / be + b, buf);
        for (int j = 0; j < be; ++j) dst[j] = __float2half_rn(buf[j]);
      } else {
        for (int j = 0; j < be; ++j) dst[j] = __float2half_rn(0.0f);
      }
    }
    for (int i = tid; i < kTokens * chunk; i += kThreads) {
      const int t = i / chunk, c = i % chunk;
      x_s[i] = __float2half_rn(t0 + t < n ? x[(t0 + t) * w.cols + k0 + c] : 0.0f);
    }
    __syncthreads();
    for (int kb = 0; kb < chunk / 16; ++kb) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::load_matrix_sync(a, w_s + 16 * warp * chunk + 16 * kb, chunk);
      for (int nb = 0; nb < kTokens / 16; ++nb) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(b, x_s + 16 * nb * chunk + 16 * kb, chunk);
        wmma::mma_sync(acc[nb], a, b, acc[nb]);
      }
    }
    __syncthreads();  // the next chunk overwrites w_s and x_s
  }
  for (int nb = 0; nb < kTokens / 16; ++nb)
    wmma::store_matrix_sync(d_s + 16 * warp * kTokens + 16 * nb, acc[nb], kTokens, wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < kRows * kTokens; i += kThreads) {
    const int t = i / kRows, r = i % kRows;  // consecutive threads write consecutive rows of one token
    if (t0 + t < n && r0 + r < w.rows) y[(t0 + t) * w.rows + r0 + r] = d_s[r * kTokens + t];
  }
}

}  // namespace

int gemm_dequant_tc_chunk(quant::FormatId format, const quant::QuantView& w) {
  int be = 0;
  quant::dispatch_format(format, [&](auto tag) {
    using T = typename decltype(tag)::Traits;
    be = quant::block_elems_for(T::block_elems, w.params);
  });
  int chunk = 0;
  if (be > 0 && be <= 64 && 64 % be == 0) chunk = 64;
  if (be == 128 || be == 256) chunk = be;
  return chunk > 0 && w.cols > 0 && w.cols % chunk == 0 && w.rows > 0 ? chunk : 0;
}

uint64_t gemm_dequant_tc_shared_bytes(int chunk) {
  return static_cast<uint64_t>(kRows + kTokens) * chunk * sizeof(__half) +
         static_cast<uint64_t>(kRows) * kTokens * sizeof(float);
}

Status gemm_dequant_tc(quant::FormatId format, const quant::QuantView& w, const float* x, int64_t n, float* y,
                       cudaStream_t stream) {
  const int chunk = gemm_dequant_tc_chunk(format, w);
  if (chunk == 0)
    return invalid_argument("gemm_dequant_tc: " + std::string(quant::format_name(format)) + " rows of " +
                            std::to_string(w.cols) + " do not split into the kernel's column steps");
  if (n <= 0) return ok_status();
  const int64_t row_tiles = (w.rows + kRows - 1) / kRows, token_tiles = (n + kTokens - 1) / kTokens;
  if (row_tiles > INT32_MAX || token_tiles > 65535)
    return unsupported("gemm_dequant_tc: [" + std::to_string(n) + ", " + std::to_string(w.rows) + "] outputs");
  const uint64_t shared = gemm_dequant_tc_shared_bytes(chunk);
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(token_tiles));
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const auto kernel = gemm_dequant_tc_kernel<T>;
    QRT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    kernel<<<grid, kThreads, shared, stream>>>(w, x, n, y, chunk);
    return cuda_launch_status("gemm_dequant_tc_kernel");
  });
}

}  // namespace qrt::kernels
