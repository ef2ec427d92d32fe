// KV cache elements on the device: every kernel that writes or reads the cache is a template over the stored type
// (float, __half, __nv_bfloat16, KvFp8), converts on the way in (round to nearest even) and computes in float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#if !defined(QRT_SIMT)
#include <cuda_fp8.h>
#endif

#include "kernels/attention/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/quant/mx.hpp"
#include "qrt/kv_type.hpp"

namespace qrt::kernels {

// One E4M3 (FN) code of an fp8 cache (KvType::kFp8).
struct KvFp8 {
  uint8_t bits;
};

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
  }
  return invalid_argument("unknown KV cache type");
}

}  // namespace qrt::kernels
