// KV cache elements on the device: every kernel that writes or reads the cache is a template over the stored type
// (float, __half, __nv_bfloat16), converts on the way in (round to nearest even) and computes in float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attention/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "qrt/kv_type.hpp"

namespace qrt::kernels {

__device__ __forceinline__ float kv_to_float(float x) { return x; }
__device__ __forceinline__ float kv_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float kv_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

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
  }
  return invalid_argument("unknown KV cache type");
}

}  // namespace qrt::kernels
