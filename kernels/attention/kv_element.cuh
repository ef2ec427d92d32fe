// KV cache elements on the device: every kernel that writes or reads the cache is a template over the stored type
// (float, __half, __nv_bfloat16, KvFp8, KvQ8_0), converts on the way in (round to nearest even) and computes in
// float. Kernels read through KvReader (element `col` of cache row `row`), which hides q8_0's blocks; the element
// types are written one element per thread with kv_from_float, q8_0 one block per warp with kv_store_q8_0_warp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>
#if !defined(QRT_SIMT)
#include <cuda_fp8.h>
#endif

#include "kernels/attention/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/quant/common.hpp"
#include "kernels/quant/mx.hpp"
#include "qrt/kv_type.hpp"

namespace qrt::kernels {

// A scaled attention score, soft-capped as cap * tanh(score / cap) when cap > 0 (AttentionShape::softcap).
__device__ __forceinline__ float soft_capped(float score, float cap) {
  return cap > 0.0f ? cap * tanhf(score / cap) : score;
}

// One E4M3 (FN) code of an fp8 cache (KvType::kFp8).
struct KvFp8 {
  uint8_t bits;
};

// A q8_0 cache (KvType::kQ8_0): a tag only, its rows are GGML Q8_0 blocks (f16 scale, 32 int8 codes).
struct KvQ8_0 {};

__device__ __forceinline__ float kv_to_float(float x) { return x; }
__device__ __forceinline__ float kv_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float kv_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
// The hardware conversion on the device (every E4M3 value is a half); the scalar decoder under the SIMT layer.
__device__ __forceinline__ float kv_to_float(KvFp8 x) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
#else
  return quant::e4m3_to_f32(x.bits);
#endif
}

// Two E4M3 codes (the first in the low byte) as two IEEE halves in one word, the first in the low half: exact, as
// every E4M3 value is a half (the tensor-core prompt kernel's fp16 tiles of an fp8 cache).
__device__ __forceinline__ uint32_t kv_fp8x2_to_half2_bits(uint16_t codes) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
#else
  return static_cast<uint32_t>(quant::f32_to_fp16(quant::e4m3_to_f32(codes & 0xFFu))) |
         (static_cast<uint32_t>(quant::f32_to_fp16(quant::e4m3_to_f32(codes >> 8))) << 16);
#endif
}

template <class T>
__device__ __forceinline__ T kv_from_float(float x);
template <>
__device__ __forceinline__ float kv_from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half kv_from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 kv_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
// Round to nearest even, saturating at ±448 (the CPU backend's quant::f32_to_e4m3, bit for bit).
template <>
__device__ __forceinline__ KvFp8 kv_from_float<KvFp8>(float x) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)
  return {static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))};
#else
  return {quant::f32_to_e4m3(x)};
#endif
}

// One head of one cache row: element d of it (a pointer to the head's first element for the element types).
template <class T>
struct KvHead {
  const T* p;
  __device__ __forceinline__ float at(int d) const { return kv_to_float(p[d]); }
};

// A q8_0 row is cols / 32 blocks of 34 bytes; element c is d * q of block c / 32, the arithmetic of the CPU
// backend's decode (quant::decode_q8_0_block). A head need not start on a block, so it keeps its row and offset.
// Blocks start at even offsets, so the scale is read as one u16.
template <>
struct KvHead<KvQ8_0> {
  const uint8_t* row;
  int64_t first;  // the head's first element in the row
  __device__ __forceinline__ float at(int d) const {
    const int64_t c = first + d;
    const uint8_t* b = row + c / kKvQ8Block * kKvQ8BlockBytes;
    const float scale = quant::fp16_to_f32(*reinterpret_cast<const uint16_t*>(b));
    return scale * static_cast<float>(static_cast<int8_t>(b[2 + c % kKvQ8Block]));
  }
};

// Four consecutive elements d .. d + 3 of one head of a cache row, as stored: load() issues the read (one 16-, 8- or
// 4-byte load; q8_0: two 2-byte code loads and the block's scale), widen() makes the floats kv_to_float would, so that
// a thread can have the loads of several rows in flight before it converts any. The caller guarantees d, the head's
// first element and the row's element count are multiples of 4 and the array is aligned to 4 elements
// (attention_split's plan and attention_split_aligned).
template <class T>
struct KvQuad;

template <>
struct KvQuad<float> {
  float4 raw;
  __device__ __forceinline__ void load(const KvHead<float>& h, int d) {
    raw = *reinterpret_cast<const float4*>(h.p + d);
  }
  __device__ __forceinline__ void widen(float (&x)[4]) const {
    x[0] = raw.x;
    x[1] = raw.y;
    x[2] = raw.z;
    x[3] = raw.w;
  }
};

// IEEE half bits, exactly: the hardware conversion on the device, the bit-level decoder under the SIMT layer.
__device__ __forceinline__ float kv_half_bits(uint32_t h) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return quant::fp16_to_f32(static_cast<uint16_t>(h));
#endif
}

template <>
struct KvQuad<__half> {
  uint2 raw;
  __device__ __forceinline__ void load(const KvHead<__half>& h, int d) {
    raw = *reinterpret_cast<const uint2*>(h.p + d);
  }
  __device__ __forceinline__ void widen(float (&x)[4]) const {
    x[0] = kv_half_bits(raw.x & 0xFFFFu);
    x[1] = kv_half_bits(raw.x >> 16);
    x[2] = kv_half_bits(raw.y & 0xFFFFu);
    x[3] = kv_half_bits(raw.y >> 16);
  }
};

template <>
struct KvQuad<__nv_bfloat16> {
  uint2 raw;
  __device__ __forceinline__ void load(const KvHead<__nv_bfloat16>& h, int d) {
    raw = *reinterpret_cast<const uint2*>(h.p + d);
  }
  __device__ __forceinline__ void widen(float (&x)[4]) const {  // a bf16 is the high half of its float
    x[0] = quant::bits_to_f32(raw.x << 16);
    x[1] = quant::bits_to_f32(raw.x & 0xFFFF0000u);
    x[2] = quant::bits_to_f32(raw.y << 16);
    x[3] = quant::bits_to_f32(raw.y & 0xFFFF0000u);
  }
};

template <>
struct KvQuad<KvFp8> {
  uint32_t raw;
  __device__ __forceinline__ void load(const KvHead<KvFp8>& h, int d) {
    raw = *reinterpret_cast<const uint32_t*>(h.p + d);
  }
  __device__ __forceinline__ void widen(float (&x)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = kv_to_float(KvFp8{static_cast<uint8_t>(raw >> (8 * i))});
  }
};

// The four codes lie in one block (a block holds 32 elements and starts at a multiple of 4), two bytes past an even
// offset: two 2-byte loads.
template <>
struct KvQuad<KvQ8_0> {
  uint32_t codes;
  uint16_t scale;
  __device__ __forceinline__ void load(const KvHead<KvQ8_0>& h, int d) {
    const int64_t c = h.first + d;
    const uint8_t* b = h.row + c / kKvQ8Block * kKvQ8BlockBytes;
    const auto* words = reinterpret_cast<const uint16_t*>(b + 2 + c % kKvQ8Block);
    codes = static_cast<uint32_t>(words[0]) | (static_cast<uint32_t>(words[1]) << 16);
    scale = *reinterpret_cast<const uint16_t*>(b);
  }
  __device__ __forceinline__ void widen(float (&x)[4]) const {
    const float s = quant::fp16_to_f32(scale);
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = s * static_cast<float>(static_cast<int8_t>(codes >> (8 * i)));
  }
};

// One K or V array of `cols` elements per row: head(row, first) reads the elements from `first` on of a row.
template <class T>
struct KvReader {
  const T* data;
  int64_t cols;
  __device__ __forceinline__ KvHead<T> head(int64_t row, int64_t first) const { return {data + row * cols + first}; }
};

template <>
struct KvReader<KvQ8_0> {
  const uint8_t* data;
  int64_t cols;
  __device__ __forceinline__ KvHead<KvQ8_0> head(int64_t row, int64_t first) const {
    return {data + row * (cols / kKvQ8Block * kKvQ8BlockBytes), first};
  }
};

// The reader of an array the kernel got as `const T*` (for q8_0 a pointer to its first byte).
template <class T>
__device__ __forceinline__ KvReader<T> kv_reader(const T* data, int64_t cols) {
  if constexpr (std::is_same_v<T, KvQ8_0>) {
    return {reinterpret_cast<const uint8_t*>(data), cols};
  } else {
    return {data, cols};
  }
}

// Quantizes one Q8_0 block held by a warp (lane l: element l) into `block` (34 bytes), with the arithmetic of the
// CPU's quant::quantize_q8_0_block so that both backends store the same bits: d = amax / 127 (IEEE division), codes
// round(x / d) computed as x * (1 / d), rounded half away from zero and clamped to int8, NaN giving -128.
__device__ __forceinline__ void kv_store_q8_0_warp(float x, uint8_t* block, int lane) {
  const float amax = warp_max(fabsf(x));  // fmaxf skips NaN as std::fmax does
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float r = roundf(x * id);
  const int q = !(r >= -128.0f) ? -128 : (r >= 127.0f ? 127 : static_cast<int>(r));
  block[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
  if (lane == 0) *reinterpret_cast<uint16_t*>(block) = quant::f32_to_fp16(d);
}

// The cache row of a sequence's key j (see KvPages).
__device__ __forceinline__ int64_t kv_row(const KvPages& pages, int64_t j) {
  if (pages.table == nullptr) return j;
  const int64_t block = pages.table[j >> pages.block_shift];
  return (block << pages.block_shift) | (j & ((int64_t{1} << pages.block_shift) - 1));
}

// Calls f(T{}) with the element type of `type` (host side, to pick a kernel instantiation).
template <class F>
Status with_kv_element(KvType type, F&& f) {
  switch (type) {
    case KvType::kF32: return f(float{});
    case KvType::kF16: return f(__half{});
    case KvType::kBF16: return f(__nv_bfloat16{});
    case KvType::kFp8: return f(KvFp8{});
    case KvType::kQ8_0: return f(KvQ8_0{});
  }
  return invalid_argument("unknown KV cache type");
}

}  // namespace qrt::kernels
