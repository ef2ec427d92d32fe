#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/dequant.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;

// One thread per decode block (row r, block b), decoding straight into its slot of out: the embedding lookup of a
// few rows (each thread writes block_elems consecutive floats, so the stores are not coalesced across a warp).
template <class Traits>
__global__ void decode_rows_kernel(quant::QuantView w, const int32_t* __restrict__ row_ids, int64_t first_row,
                                   int64_t rows, float* __restrict__ out) {
  const int be = quant::block_elems_for(Traits::block_elems, w.params);
  const int64_t blocks_per_row = w.cols / be;
  const int64_t n = rows * blocks_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t r = idx / blocks_per_row;
    const int64_t b = idx % blocks_per_row;
    const int64_t src = row_ids != nullptr ? static_cast<int64_t>(row_ids[r]) : first_row + r;
    float* dst = out + r * w.cols + b * be;
    if (src < 0 || src >= w.rows) {
      for (int j = 0; j < be; ++j) dst[j] = __int_as_float(0x7fc00000);  // quiet NaN marks a bad id
      continue;
    }
    Traits::decode_block(w, src, b, dst);
  }
}

// Half-precision output for the tensor-core GEMM: a warp decodes 32 consecutive decode blocks into shared memory
// (one per lane, rows padded by one float against bank conflicts), then writes them out together, block by block,
// each lane storing two elements at a time over consecutive columns, so the stores are coalesced and half the bytes
// of fp32. The write-out computes one block's destination per block (a warp-uniform division), never per element:
// 64-bit divisions per element made this kernel issue-bound at a fifth of the copy bandwidth on an H100. Formats
// whose blocks have a fixed size of at most kSmallBlock elements decode into registers instead, one block per
// thread (already contiguous per warp).
constexpr int kSmallBlock = 8;

template <class Traits>
__global__ void decode_rows_half_staged_kernel(quant::QuantView w, int64_t first_row, int64_t rows,
                                               __half* __restrict__ out) {
  extern __shared__ float stage[];  // [32][be + 1]
  const int be = quant::block_elems_for(Traits::block_elems, w.params);
  const int lane = threadIdx.x;
  const int64_t blocks_per_row = w.cols / be;
  const int64_t n = rows * blocks_per_row;
  // Pairs when every block starts on an even column (w.cols is a multiple of be) of a 4-byte aligned output.
  const bool pairs = be % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0;
  for (int64_t idx0 = static_cast<int64_t>(blockIdx.x) * 32; idx0 < n; idx0 += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t idx = idx0 + lane;
    if (idx < n) Traits::decode_block(w, first_row + idx / blocks_per_row, idx % blocks_per_row, stage + lane * (be + 1));
    __syncwarp();
    const int count = static_cast<int>(n - idx0 < 32 ? n - idx0 : 32);
    int64_t r = idx0 / blocks_per_row, b = idx0 - r * blocks_per_row;  // the destination of block idx0 + k
    for (int k = 0; k < count; ++k) {
      const float* src = stage + k * (be + 1);
      __half* dst = out + r * w.cols + b * be;
      if (pairs) {
        for (int e = 2 * lane; e < be; e += 64)
          *reinterpret_cast<__half2*>(dst + e) = __floats2half2_rn(src[e], src[e + 1]);
      } else {
        for (int e = lane; e < be; e += 32) dst[e] = __float2half_rn(src[e]);
      }
      if (++b == blocks_per_row) {
        b = 0;
        ++r;
      }
    }
    __syncwarp();  // the stage is read by every lane before the next round overwrites it
  }
}

template <class Traits>
__global__ void decode_rows_half_small_kernel(quant::QuantView w, int64_t first_row, int64_t rows,
                                              __half* __restrict__ out) {
  constexpr int be = Traits::block_elems;
  const int64_t blocks_per_row = w.cols / be;
  const int64_t n = rows * blocks_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    float values[Traits::block_elems];
    Traits::decode_block(w, first_row + idx / blocks_per_row, idx % blocks_per_row, values);
    __half* dst = out + (idx / blocks_per_row) * w.cols + (idx % blocks_per_row) * be;
    for (int j = 0; j < be; ++j) dst[j] = __float2half_rn(values[j]);
  }
}

// Formats whose rows split into chunks of 8 elements decodable on their own, with nothing shared between chunks but
// per-group parameters: a thread takes one chunk, found with one division, and stores its fp16 values as one 16-byte
// write. The generic kernels above divide twice per element (the one-element formats: F32, BF16, FP8 per tensor and
// in tiles, F8Q8, HQQ), which left them issue-bound far below the copy bandwidth, or give a lane a whole group staged
// in shared memory (AFQ); the dequantization of a BF16 or an AFQ model's prefill went through them.
constexpr int kChunk = 8;

// A one-element format's chunk: its decode_block per element.
template <class Traits>
struct OneElementChunks {
  __device__ static void decode(const quant::QuantView& w, int64_t row, int64_t chunk, float (&v)[kChunk]) {
#pragma unroll
    for (int k = 0; k < kChunk; ++k) Traits::decode_block(w, row, kChunk * chunk + k, &v[k]);
  }
};

// AFQ: 8 codes fill exactly Bits bytes of the row's bit stream (afq.hpp), and the group size (32..128) is a multiple
// of 8, so a chunk has one scale and bias: w = q · scale + bias with the reference's two roundings (no FMA: where
// q · scale cancels the bias, as at a group's edge value, a fused result keeps q · scale's rounding error instead of
// the reference's 0).
template <int Bits>
struct AfqChunks {
  __device__ static void decode(const quant::QuantView& w, int64_t row, int64_t chunk, float (&v)[kChunk]) {
    const int64_t group = row * (w.cols / w.params.group_size) + kChunk * chunk / w.params.group_size;
    const float scale = quant::load_float_scale(w.scales, group, w.params.scale_type);
    const float bias = quant::load_float_scale(w.biases, group, w.params.scale_type);
    const uint8_t* p = w.data + row * (w.cols / kChunk * Bits) + chunk * Bits;
    uint64_t bits = 0;
#pragma unroll
    for (int k = 0; k < Bits; ++k) bits |= static_cast<uint64_t>(__ldg(p + k)) << (8 * k);
    constexpr uint64_t kMask = (uint64_t{1} << Bits) - 1;
#pragma unroll
    for (int e = 0; e < kChunk; ++e)
      v[e] = quant::mul_then_add(static_cast<float>(static_cast<uint32_t>((bits >> (e * Bits)) & kMask)), scale, bias);
  }
};
template <int Bits>
constexpr int afq_bits(const quant::AfqTraitsBase<Bits>*) {
  return Bits;
}

template <class Chunks>
__global__ void decode_rows_half_chunks_kernel(quant::QuantView w, int64_t first_row, int64_t chunks,
                                               __half* __restrict__ out) {
  const int64_t chunks_per_row = w.cols / kChunk;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < chunks; g += stride) {
    const int64_t r = g / chunks_per_row;
    float v[kChunk];
    Chunks::decode(w, first_row + r, g - r * chunks_per_row, v);
    uint32_t h[kChunk];
#pragma unroll
    for (int k = 0; k < kChunk; ++k) h[k] = __half_as_ushort(__float2half_rn(v[k]));
    reinterpret_cast<uint4*>(out)[g] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                                                  h[6] | h[7] << 16);
  }
}

__global__ void to_half_kernel(const float* __restrict__ x, int64_t n, __half* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __float2half_rn(x[i]);
}

Status check_view(const quant::QuantView& w, int be, const char* op) {
  if (w.rows <= 0 || w.cols <= 0 || w.data == nullptr)
    return invalid_argument(std::string(op) + ": empty weight view");
  if (be <= 0 || w.cols % be != 0)
    return invalid_argument(std::string(op) + ": row length " + std::to_string(w.cols) +
                            " is not a whole number of blocks of " + std::to_string(be));
  return ok_status();
}

Status launch(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t first_row,
              int64_t rows, float* out, cudaStream_t stream, const char* op) {
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, w.params);
    QRT_TRY(check_view(w, be, op));
    if (rows == 0) return ok_status();
    const int64_t n = rows * (w.cols / be);
    decode_rows_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(w, row_ids, first_row, rows, out);
    return cuda_launch_status("decode_rows_kernel");
  });
}

Status check_row_range(const quant::QuantView& w, int64_t first_row, int64_t rows) {
  if (first_row < 0 || rows < 0 || first_row + rows > w.rows)
    return out_of_range("dequantize_rows_half: rows [" + std::to_string(first_row) + ", " +
                        std::to_string(first_row + rows) + ") outside a matrix of " + std::to_string(w.rows) + " rows");
  return ok_status();
}

}  // namespace

Status dequantize_rows_half(quant::FormatId format, const quant::QuantView& w, int64_t first_row, int64_t rows,
                            __half* out, cudaStream_t stream) {
  QRT_TRY(check_row_range(w, first_row, rows));
  if (dequantize_rows_half_by_policy_applies(format, w, out))
    return dequantize_rows_half_by_policy(format, w, first_row, rows, out, stream);
  return dequantize_rows_half_generic(format, w, first_row, rows, out, stream);
}

Status dequantize_rows_half_generic(quant::FormatId format, const quant::QuantView& w, int64_t first_row,
                                    int64_t rows, __half* out, cudaStream_t stream) {
  QRT_TRY(check_row_range(w, first_row, rows));
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, w.params);
    QRT_TRY(check_view(w, be, "dequantize_rows_half"));
    if (rows == 0) return ok_status();
    const int64_t n = rows * (w.cols / be);
    const int64_t chunks = rows * (w.cols / kChunk);
    if (w.cols % kChunk == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
      if constexpr (T::block_elems == 1) {
        decode_rows_half_chunks_kernel<OneElementChunks<T>>
            <<<grid_for(chunks, kThreads), kThreads, 0, stream>>>(w, first_row, chunks, out);
        return cuda_launch_status("decode_rows_half_chunks_kernel");
      } else if constexpr (T::family == quant::Family::kAfq) {
        decode_rows_half_chunks_kernel<AfqChunks<afq_bits(static_cast<const T*>(nullptr))>>
            <<<grid_for(chunks, kThreads), kThreads, 0, stream>>>(w, first_row, chunks, out);
        return cuda_launch_status("decode_rows_half_chunks_kernel");
      }
    }
    if constexpr (T::block_elems != 0 && T::block_elems <= kSmallBlock) {
      decode_rows_half_small_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(w, first_row, rows, out);
      return cuda_launch_status("decode_rows_half_small_kernel");
    }
    const size_t shared = static_cast<size_t>(32) * (be + 1) * sizeof(float);
    if (shared > 48 * 1024)
      return unsupported("dequantize_rows_half: decode blocks of " + std::to_string(be) + " elements");
    const int64_t warps = (n + 31) / 32;
    const unsigned grid = static_cast<unsigned>(warps < (int64_t{1} << 30) ? warps : (int64_t{1} << 30));
    decode_rows_half_staged_kernel<T><<<grid, 32, shared, stream>>>(w, first_row, rows, out);
    return cuda_launch_status("decode_rows_half_staged_kernel");
  });
}

Status to_half(const float* x, int64_t n, __half* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("to_half: negative length");
  if (n == 0) return ok_status();
  to_half_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, n, out);
  return cuda_launch_status("to_half_kernel");
}

Status gather_rows(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t rows,
                   float* out, cudaStream_t stream) {
  if (rows < 0) return invalid_argument("gather_rows: negative row count");
  if (rows > 0 && row_ids == nullptr) return invalid_argument("gather_rows: no row ids");
  return launch(format, w, row_ids, 0, rows, out, stream, "gather_rows");
}

}  // namespace qrt::kernels
