// Activation memory from the CUDA backend's two allocators (backend/cuda_context.hpp): the size-class caching pool
// over cudaMalloc, and stream-ordered cudaMallocAsync from the device pool (release threshold raised). Host time per
// allocate + release pair at scratch-like sizes, and per "step" (the buffers one Llama-3-8B decode step and its
// sampling workspace ask for, a small kernel on them, all released), with the device kept busy so a release that
// synchronizes shows. Which one the backend uses by default follows these numbers: bench/NOTES-allocator.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <vector>

#include "backend/cuda_backend.hpp"
#include "gpu_bench_util.hpp"

namespace qrt::bench {
namespace {

std::unique_ptr<CudaBackend> backend_with(DeviceAllocator allocator) {
  auto b = CudaBackend::create(0, nullptr, allocator);
  if (!b.ok()) {
    std::fprintf(stderr, "%s\n", b.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*b);
}

// Host microseconds per allocate + deallocate of `bytes`, after warm-up (the pool or the mempool has the block).
void BM_AllocateRelease(benchmark::State& state, DeviceAllocator allocator) {
  auto backend = backend_with(allocator);
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  for (int i = 0; i < 8; ++i) backend->deallocate(*backend->allocate(bytes));
  for (auto _ : state) {
    auto buffer = backend->allocate(bytes);
    if (!buffer.ok()) {
      state.SkipWithError(buffer.status().to_string().c_str());
      return;
    }
    backend->deallocate(*buffer);
  }
  (void)backend->synchronize();
}

// One decode step's worth of buffers ([1, 4096] activations, [1, 14336] FFN, [1, 128256] logits, the sampler's
// workspace), an elementwise kernel writing each, then all released; the stream is never drained in between, as
// in a decode loop, and the step is timed on the host.
void BM_DecodeStepBuffers(benchmark::State& state, DeviceAllocator allocator) {
  auto backend = backend_with(allocator);
  const std::vector<uint64_t> sizes = {4096 * 4, 4096 * 4, 1024 * 4, 1024 * 4, 4096 * 4, 14336 * 4,
                                       14336 * 4, 4096 * 4, 128256 * 4, 128256 * 24, 4096 * 4, 256};
  std::vector<qrt::DeviceBuffer> live;
  auto step = [&] {
    live.clear();
    for (uint64_t b : sizes) live.push_back(*backend->allocate(b));
    for (const qrt::DeviceBuffer& d : live) {
      const int64_t n = static_cast<int64_t>(d.bytes / 4);
      const F32View v{static_cast<float*>(d.ptr), n, 1};
      (void)backend->add(v, v, v);
    }
    for (const qrt::DeviceBuffer& d : live) backend->deallocate(d);
  };
  for (int i = 0; i < 4; ++i) step();
  for (auto _ : state) step();
  (void)backend->synchronize();
}

BENCHMARK_CAPTURE(BM_AllocateRelease, pool, DeviceAllocator::kCachingPool)
    ->Name("allocator/pool/allocate_release_bytes")->Arg(4096)->Arg(1 << 20)->Arg(64 << 20);
BENCHMARK_CAPTURE(BM_AllocateRelease, stream_ordered, DeviceAllocator::kStreamOrdered)
    ->Name("allocator/stream_ordered/allocate_release_bytes")->Arg(4096)->Arg(1 << 20)->Arg(64 << 20);
BENCHMARK_CAPTURE(BM_DecodeStepBuffers, pool, DeviceAllocator::kCachingPool)->Name("allocator/pool/decode_step");
BENCHMARK_CAPTURE(BM_DecodeStepBuffers, stream_ordered, DeviceAllocator::kStreamOrdered)
    ->Name("allocator/stream_ordered/decode_step");

}  // namespace
}  // namespace qrt::bench
