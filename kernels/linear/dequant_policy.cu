// W → fp16 through the int8 tensor-core GEMM's weight policies (gemm_q8_mma_formats.cuh), for the formats that have
// one: the prefill path's dequantization (dequant.hpp) at the copy bandwidth's pace rather than a third of it.
//
// Why: the generic kernel (dequant.cu) gives each lane a whole decode block (256 values of a K-quant) through the
// format traits' scalar decode, staged in 33 KB of shared memory per 32-thread block, so an SM holds about six
// warps and little is in flight; on an H200 it ran at 1.3 TB/s (read + write) against 4.2 for a copy, and with a
// prompt of 512 tokens dequantization was about half of a q4_k prefill (8489 tok/s against 16396 with fp16 copies
// of the weights kept from upload).
//
// Here a warp takes 16 rows times one policy step (256 columns of a K-quant): lane (g, t) loads its bytes of rows g and
// g + 8, as the GEMM's A fragments do (a quarter of each row's step per lane, all of it used), and per 32-column block
// writes columns 4t .. 4t+3 and 16 + 4t .. 16 + 4t+3 of both rows as two 8-byte stores, so a store instruction fills
// eight whole 32-byte sectors. Values are d · q − m (times the tensor's global scale for NVFP4), the policy's
// regrouping of the CPU reference's decode; d · q is exact in fp32 for every policy format, so the result is the
// reference's up to the one rounding of the subtraction (NVFP4: the same two roundings), then rounded to fp16. No
// shared memory: 8 warps a block, as many blocks as registers allow.
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/linear/dequant.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemm_q8_mma_block.cuh"
#include "kernels/linear/gemm_q8_mma_formats.cuh"

namespace qrt::kernels {
namespace {

constexpr int kWarps = 8;

struct HalfDecodeParams {
  mma_block::MmaParams w;  // the matrix (matrix_params: rows, bytes, steps, scale and bias arrays)
  int64_t first_row;
  int64_t rows;  // decoded: out's rows
  int64_t cols;
  int64_t tasks;  // (16-row tile, step) pairs
  __half* out;
};

// Four codes (signed bytes of k) times d minus m, as fp16.
__device__ __forceinline__ uint2 four_halves(uint32_t k, float d, float m) {
  uint32_t h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    h[i] = __half_as_ushort(__float2half_rn(fmaf(d, static_cast<float>(static_cast<int8_t>(k >> (8 * i))), -m)));
  return make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
}

template <class P>
__global__ void __launch_bounds__(kWarps * 32) decode_rows_half_policy_kernel(const HalfDecodeParams p) {
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (task >= p.tasks) return;
  // Neighbouring warps take neighbouring steps of the same rows, so a block reads each row's bytes in one stretch.
  const int64_t tile = task / p.w.steps, s = task % p.w.steps;
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  int64_t r[2];
  typename P::Raw raw[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r[h] = 16 * tile + 8 * h + g;
    const int64_t src = p.first_row + min(r[h], p.rows - 1);  // past the end: a repeat, not stored
    const uint8_t* scale_row = mma_block::separate_scales<P>() ? p.w.scales + src * p.w.scale_row_bytes : nullptr;
    const uint8_t* bias_row = mma_block::affine_groups<P>() ? p.w.biases + src * p.w.scale_row_bytes : nullptr;
    raw[h] = mma_block::load_step<P>(p.w.data + src * p.w.row_bytes, scale_row, bias_row, p.w.group_shift,
                                     p.w.scale_type, s, t);
  }
#pragma unroll
  for (int j = 0; j < P::kStepBlocks; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t k0, k16;
      float d, d16, m, m16;
      mma_block::block_halves<P>(raw[h], j, k0, k16, d, d16, m, m16);
      if constexpr (mma_block::global_scale<P>()) {
        // NVFP4 (no minimum): d is half the E4M3 scale against doubled levels, so (d · G) · q is the reference's
        // (E4M3 · G) · level with the same two roundings.
        d *= p.w.global_scale;
        d16 *= p.w.global_scale;
      }
      if (r[h] >= p.rows) continue;
      __half* dst = p.out + r[h] * p.cols + s * P::kStepCols + 32 * j + 4 * t;
      *reinterpret_cast<uint2*>(dst) = four_halves(k0, d, m);
      *reinterpret_cast<uint2*>(dst + 16) = four_halves(k16, d16, m16);
    }
  }
}

}  // namespace

bool dequantize_rows_half_by_policy_applies(quant::FormatId format, const quant::QuantView& w, const __half* out) {
  // AFQ's policy regroups w = s · q + b as d · q' − m (8-bit codes offset by 128), which rounds differently from the
  // reference where s · q cancels b; the generic kernel's chunks compute the reference's expression instead.
  if (quant::format_info(format).family == quant::Family::kAfq) return false;
  return gemm_q8_mma_applies(format, w) && reinterpret_cast<uintptr_t>(out) % 8 == 0;
}

Status dequantize_rows_half_by_policy(quant::FormatId format, const quant::QuantView& w, int64_t first_row,
                                      int64_t rows, __half* out, cudaStream_t stream) {
  if (!dequantize_rows_half_by_policy_applies(format, w, out))
    return invalid_argument("dequantize_rows_half_by_policy: no policy for " + std::string(quant::format_name(format)) +
                            " at this shape or alignment");
  if (first_row < 0 || rows < 0 || first_row + rows > w.rows)
    return out_of_range("dequantize_rows_half_by_policy: rows [" + std::to_string(first_row) + ", " +
                        std::to_string(first_row + rows) + ") outside a matrix of " + std::to_string(w.rows) + " rows");
  if (rows == 0) return ok_status();
  return mma_q8::with_policy(
      format,
      [&](auto policy) -> Status {
        using P = decltype(policy);
        const mma_block::MmaParams matrix = mma_block::matrix_params<P>(w);
        const HalfDecodeParams p{matrix, first_row, rows, w.cols, (rows + 15) / 16 * matrix.steps, out};
        const int64_t blocks = (p.tasks + kWarps - 1) / kWarps;
        if (blocks > INT_MAX) return unsupported("dequantize_rows_half: " + std::to_string(rows) + " rows at once");
        decode_rows_half_policy_kernel<P><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(p);
        return cuda_launch_status("decode_rows_half_policy_kernel");
      },
      [&] { return invalid_argument("dequantize_rows_half_by_policy: no policy"); });
}

}  // namespace qrt::kernels
