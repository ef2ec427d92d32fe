// Shared pieces of the GPU benchmarks: event timing, the measured copy-bandwidth roofline, device buffers.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace qrt::bench {

// Aborting is acceptable in a benchmark binary (never in the library): a failed CUDA call makes numbers meaningless.
#define QRT_BENCH_CUDA(call)                                                                   \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                  \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { QRT_BENCH_CUDA(cudaMalloc(&ptr, n)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

// Times `fn` (which enqueues work on `stream`) with CUDA events, once per benchmark iteration.
template <class Fn>
void time_with_events(benchmark::State& state, cudaStream_t stream, Fn&& fn) {
  cudaEvent_t start, stop;
  QRT_BENCH_CUDA(cudaEventCreate(&start));
  QRT_BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) fn();  // warm-up: module load, caches, clocks
  QRT_BENCH_CUDA(cudaStreamSynchronize(stream));
  for (auto _ : state) {
    QRT_BENCH_CUDA(cudaEventRecord(start, stream));
    fn();
    QRT_BENCH_CUDA(cudaEventRecord(stop, stream));
    QRT_BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    QRT_BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
  }
  QRT_BENCH_CUDA(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// Device-to-device copy bandwidth in bytes/s (read + write), measured once per process: the roofline every
// memory-bound kernel is reported against.
double measured_copy_bandwidth();

}  // namespace qrt::bench
