// Programmatic dependent launch (Hopper and later): a kernel launched by launch_programmatic may be scheduled while
// the kernel before it on the stream is still running, and waits (wait_for_previous_grid) only where it needs that
// kernel's results. Included only by .cu files.
//
// Why: a decode step of an 8B model is about 320 kernels, most of them a few microseconds to a few tens long. Between
// two dependent kernels an H100 drains the first grid, then launches and ramps up the second: on the order of a
// microsecond or two each time, so some 0.3-0.6 ms of a ~1.3 ms step at the memory roofline. With the attribute the
// next grid's blocks are placed as the previous grid's blocks retire and run their prologue (a GEMV's row
// addresses and the L2 prefetch of its weights, which no earlier kernel writes) under the previous grid's tail.
//
// The rules every kernel launched this way follows (the SIMT layer checks the first; launch_programmatic's callers
// are the decode path's kernels):
//   - every thread calls wait_for_previous_grid() before it reads anything an earlier kernel may write, before it
//     writes anything an earlier kernel may read, and before it exits (so that this grid completes only after the
//     previous one: the next kernel's wait then covers every kernel before it);
//   - before the wait it touches nothing but memory no kernel writes (weights, its parameters).
// allow_next_grid() lets the following programmatic launch be scheduled once every block of this grid has called it
// (or exited); the following grid still waits for this one's completion, so calling it first thing is safe.
//
// Off until a CUDA backend is created on compute capability 9.0 or later (set_programmatic_launch in
// programmatic_launch.hpp; QRT_CUDA_PDL=0 keeps it off): launches are then ordinary stream launches and the waits
// return at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/programmatic_launch.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// griddepcontrol.wait: returns once every grid this one depends on has completed and its writes are visible (at
// once when the launch was not programmatic).
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(QRT_SIMT)
  ::qrt::simt::detail::grid_dependency_wait(std::source_location::current());
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// griddepcontrol.launch_dependents.
__device__ __forceinline__ void allow_next_grid() {
#if !defined(QRT_SIMT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Warms L2 with bytes [p, p + bytes) that no earlier kernel writes (a GEMV's weight rows), before the wait: one
// bulk prefetch from the calling thread, the span trimmed to whole 16-byte units inside it. A hint: nothing waits
// for it, and it does nothing before Hopper or under the SIMT layer.
__device__ __forceinline__ void prefetch_to_l2(const void* p, uint64_t bytes) {
#if !defined(QRT_SIMT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  const uint64_t first = (a + 15) & ~uint64_t{15}, last = (a + bytes) & ~uint64_t{15};
  if (last > first) {
    const uint64_t n = last - first < (uint64_t{1} << 20) ? last - first : (uint64_t{1} << 20);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(first), "r"(static_cast<uint32_t>(n)) : "memory");
  }
#else
  (void)p;
  (void)bytes;
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization when the switch is on.
template <class... P, class... A>
Status launch_programmatic(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                           cudaStream_t stream, A&&... args) {
  const bool programmatic = programmatic_launch();
#if defined(QRT_SIMT)
  kernel * ::qrt::simt::launch({name, __FILE__, __LINE__}, grid, block, smem, stream,
                               programmatic)(std::forward<A>(args)...);
  return cuda_launch_status(name);
#else
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  QRT_TRY(cuda_status(cudaLaunchKernelEx(&config, kernel, std::forward<A>(args)...), name));
  return cuda_launch_status(name);
#endif
}

}  // namespace qrt::kernels
