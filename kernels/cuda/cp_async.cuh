// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later), shared by the kernels that
// stream tiles through shared memory (the staged GEMVs, prompt attention).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qrt::kernels {

// 16-byte global -> shared copies in flight (sm_80+). Turing has no cp.async: there the copy is a plain load and
// store, and commit/wait do nothing (correct, only without the overlap). Under the SIMT layer (QRT_SIMT, the gpu-sim
// tests) the PTX is replaced by the layer's model of it, which lands a copy only at the issuing thread's wait.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src) {
#if defined(QRT_SIMT)
  qrt::simt::detail::async_copy(smem_dst, gmem_src, 16, std::source_location::current());
#elif __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(__cvta_generic_to_global(gmem_src))
               : "memory");
#else
  *static_cast<uint4*>(smem_dst) = *static_cast<const uint4*>(gmem_src);
#endif
}
// The same for a 4-byte piece (.ca: through L1), for rows whose pieces are only 4-byte aligned (a q8_0 cache's).
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src) {
#if defined(QRT_SIMT)
  qrt::simt::detail::async_copy(smem_dst, gmem_src, 4, std::source_location::current());
#elif __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(__cvta_generic_to_global(gmem_src))
               : "memory");
#else
  *static_cast<uint32_t*>(smem_dst) = *static_cast<const uint32_t*>(gmem_src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(QRT_SIMT)
  qrt::simt::detail::async_commit();
#elif __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(QRT_SIMT)
  qrt::simt::detail::async_wait(Pending, std::source_location::current());
#elif __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

}  // namespace qrt::kernels
