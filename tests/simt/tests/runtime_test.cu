// The SIMT layer's runtime: launch limits an H100 enforces, device memory (poisoned, range-checked), CUDA's copy rules
// for pageable and pinned memory, streams that run only what the host waits for (so a missing cross-stream dependency
// shows), events, stream capture and graph replay, programmatic launches and their waits, and the per-stream counters
// tests assert host costs with.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "simt/simt.hpp"
#include "simt_test_util.hpp"

namespace qrt::simt::test {
namespace {

__global__ void fill(float* out, float value, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}

__global__ void scale_add(const float* in, float* out, float a, float b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a * in[i] + b;
}

__global__ void touch_shared(float* out) {
  extern __shared__ float big[];
  const int n = 100 * 1024 / 4;
  for (int i = threadIdx.x; i < n; i += blockDim.x) big[i] = static_cast<float>(i % 7);  // sums stay exact
  __syncthreads();
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += big[n - 1 - i];
  atomicAdd(out, s);
}

// ---- launches --------------------------------------------------------------------------------------------------

TEST(SimtRuntime, LaunchesAnH100WouldRefuseAreErrors) {
  DeviceArray<float> out(16);
  (void)cudaGetLastError();
  fill<<<1, 1025>>>(out.ptr, 1.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "launch errors are not sticky";
  fill<<<dim3(1, 65536), 32>>>(out.ptr, 1.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  fill<<<1, dim3(1, 1, 65)>>>(out.ptr, 1.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  fill<<<0, 32>>>(out.ptr, 1.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  fill<<<1, 32, 48 * 1024 + 1>>>(out.ptr, 1.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "dynamic shared memory over 48 KiB needs the opt-in";
  fill<<<1, 1024, 48 * 1024>>>(out.ptr, 2.0f, 16);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download()[15], 2.0f);
}

TEST(SimtRuntime, SharedMemoryBeyond48KiBAfterTheOptIn) {
  DeviceArray<float> sum(std::vector<float>{0.0f});
  touch_shared<<<1, 256, 100 * 1024>>>(sum.ptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(touch_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024), cudaSuccess);
  touch_shared<<<1, 256, 100 * 1024>>>(sum.ptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  double want = 0;
  for (int i = 0; i < 100 * 1024 / 4; ++i) want += i % 7;
  EXPECT_EQ(sum.download()[0], static_cast<float>(want));
  EXPECT_EQ(cudaFuncSetAttribute(touch_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1),
            cudaErrorInvalidValue);
}

TEST(SimtRuntime, DevicePropertiesAreAnH100s) {
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.major, 9);
  EXPECT_EQ(p.minor, 0);
  EXPECT_EQ(p.multiProcessorCount, 132);
  EXPECT_EQ(p.warpSize, 32);
  EXPECT_EQ(p.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(p.sharedMemPerBlockOptin, 227u * 1024);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_GE(count, 2) << "tensor-parallel tests need several devices";
  EXPECT_EQ(cudaGetDeviceProperties(&p, count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
}

// ---- memory ----------------------------------------------------------------------------------------------------

TEST(SimtRuntime, FreshDeviceMemoryIsPoisonAndCopiesAreRangeChecked) {
  DeviceArray<uint32_t> a(1000);
  for (uint32_t v : a.download()) ASSERT_EQ(v, 0xffffffffu);
  float f;
  uint32_t bits = 0xffffffffu;
  std::memcpy(&f, &bits, 4);
  EXPECT_TRUE(std::isnan(f)) << "as floats the poison is NaN";
  std::vector<uint32_t> host(1001, 7);
  EXPECT_EQ(cudaMemcpy(a.ptr, host.data(), 1001 * 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "one element past the allocation";
  EXPECT_EQ(cudaMemcpy(a.ptr + 1, host.data(), 1000 * 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), a.ptr, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue) << "wrong direction";
  EXPECT_EQ(cudaMemset(a.ptr + 500, 0, 501 * 4), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemset(a.ptr + 500, 0, 500 * 4), cudaSuccess);
  const auto got = a.download();
  EXPECT_EQ(got[499], 0xffffffffu);
  EXPECT_EQ(got[500], 0u);
  EXPECT_EQ(cudaFree(a.ptr + 1), cudaErrorInvalidValue) << "not the start of an allocation";
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a.ptr + 10), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, host.data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, size_t{1} << 20);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, total + 1), cudaErrorMemoryAllocation);
}

TEST(SimtRuntime, PageableCopiesFollowCudasHostSynchronizationRules) {
  const int n = 4096;
  DeviceArray<float> d(n);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // Pageable source: staged before the call returns, so overwriting it right away is safe.
  std::vector<float> src(n, 3.0f);
  ASSERT_EQ(cudaMemcpyAsync(d.ptr, src.data(), n * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  std::fill(src.begin(), src.end(), -1.0f);
  // Pageable destination: the call returns once the copy has landed.
  std::vector<float> back(n, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d.ptr, n * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(back[0], 3.0f);
  EXPECT_EQ(back[n - 1], 3.0f);

  // Pinned source: read when the copy runs, so a host write before the stream is synchronized races - and here
  // always loses, because queued work waits for the host.
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n * 4), cudaSuccess);
  std::fill(pinned, pinned + n, 5.0f);
  ASSERT_EQ(cudaMemcpyAsync(d.ptr, pinned, n * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  std::fill(pinned, pinned + n, 6.0f);  // the bug
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(d.download()[7], 6.0f) << "the copy saw the host's later write";
  // Pinned destination: nothing lands before the host waits.
  std::fill(pinned, pinned + n, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d.ptr, n * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(pinned[0], 0.0f) << "read before synchronizing";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pinned[0], 6.0f);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
}

// ---- streams and events ----------------------------------------------------------------------------------------

TEST(SimtRuntime, AMissingCrossStreamDependencyLeavesTheOtherStreamsWorkUndone) {
  const int n = 1000;
  DeviceArray<float> a(n), b(n);
  cudaStream_t producer, consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  // Without an event the consumer's copy runs before the producer's kernel: it copies the poison.
  fill<<<4, 128, 0, producer>>>(a.ptr, 9.0f, n);
  ASSERT_EQ(cudaMemcpyAsync(b.ptr, a.ptr, n * 4, cudaMemcpyDeviceToDevice, consumer), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_TRUE(std::isnan(b.download()[0]));
  ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
  // With the event the copy waits for the kernel, and syncing the consumer alone runs both.
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  fill<<<4, 128, 0, producer>>>(a.ptr, 4.0f, n);
  ASSERT_EQ(cudaEventRecord(done, producer), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(consumer, done, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.ptr, a.ptr, n * 4, cudaMemcpyDeviceToDevice, consumer), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(b.download()[n - 1], 4.0f);
  ASSERT_EQ(cudaEventQuery(done), cudaSuccess);
  cudaEventDestroy(done);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

TEST(SimtRuntime, TheLegacyStreamOrdersBlockingStreamsButNotNonBlockingOnes) {
  const int n = 512;
  DeviceArray<float> a(n), b(n);
  cudaStream_t blocking, non_blocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
  fill<<<2, 128, 0, blocking>>>(a.ptr, 1.5f, n);
  std::vector<float> host(n);
  ASSERT_EQ(cudaMemcpy(host.data(), a.ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);  // waits for `blocking`
  EXPECT_EQ(host[0], 1.5f);
  fill<<<2, 128, 0, non_blocking>>>(b.ptr, 2.5f, n);
  ASSERT_EQ(cudaMemcpy(host.data(), b.ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);  // does not wait
  EXPECT_TRUE(std::isnan(host[0])) << "a non-blocking stream is not ordered with the legacy stream";
  ASSERT_EQ(cudaStreamSynchronize(non_blocking), cudaSuccess);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(non_blocking);
}

TEST(SimtRuntime, QueuedWorkRunsByItselfWhenNoHostWaits) {
  DeviceArray<float> a(64);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  fill<<<1, 64, 0, s>>>(a.ptr, 1.0f, 64);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  // Polling makes progress as on a GPU (a query nudges the device), and so does waiting without any call.
  int polls = 0;
  while (cudaEventQuery(e) == cudaErrorNotReady) ++polls;
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  fill<<<1, 64, 0, s>>>(a.ptr, 2.0f, 64);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess) << "the device ran the queued kernel by itself";
  float ms = -1.0f;
  cudaEvent_t start;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  fill<<<1, 64, 0, s>>>(a.ptr, 3.0f, 64);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, e), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaEventDestroy(start);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

TEST(SimtRuntime, StreamOrderedAllocationAndFree) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 256 * 4, s), cudaSuccess);
  fill<<<1, 256, 0, s>>>(p, 8.0f, 256);
  std::vector<float> host(256);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), p, 256 * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(host[255], 8.0f);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered) << "freed in stream order";
  cudaStreamDestroy(s);
}

// ---- graphs and counters ---------------------------------------------------------------------------------------

TEST(SimtRuntime, CaptureRecordsAndLaunchReplays) {
  const int n = 300;
  DeviceArray<float> in(n), out(n);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n * 4), cudaSuccess);
  reset_counters();

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(in.ptr, pinned, n * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  scale_add<<<2, 128, 0, s>>>(in.ptr, out.ptr, 2.0f, 1.0f, n);
  scale_add<<<2, 128, 0, s>>>(out.ptr, out.ptr, 1.0f, 0.5f, n);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u);
  EXPECT_EQ(stream_counters(s).kernel_launches, 0u) << "captured, not launched";
  for (float v : in.download()) ASSERT_TRUE(std::isnan(v)) << "nothing ran during capture";

  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    std::fill(pinned, pinned + n, static_cast<float>(replay));  // the captured copy reads it at each replay
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(out.download()[n - 1], 2.0f * replay + 1.5f);
  }
  const StreamCounters c = stream_counters(s);
  EXPECT_EQ(c.graph_launches, 3u);
  EXPECT_EQ(c.graph_kernel_nodes, 6u);
  EXPECT_EQ(c.kernel_launches, 0u);
  EXPECT_EQ(c.memcpy_host_to_device, 3u);
  EXPECT_EQ(c.memcpy_host_to_device_bytes, 3u * n * 4);
  EXPECT_EQ(c.host_sync_calls, 3u);
  EXPECT_EQ(c.host_syncs, 3u) << "each replay was still queued when the host waited";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
}

TEST(SimtRuntime, WhatACaptureForbids) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> a(64);
  // A synchronization inside the capture invalidates it.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  fill<<<1, 64, 0, s>>>(a.ptr, 1.0f, 64);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  // So does an allocation (potentially synchronizing) during a global-mode capture, and the legacy stream.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  fill<<<1, 64>>>(a.ptr, 1.0f, 64);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  // Relaxed mode allows the allocation.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(SimtRuntime, ACaptureForksAndJoinsThroughEvents) {
  const int n = 256;
  DeviceArray<float> a(n), b(n);
  cudaStream_t main_stream, side;
  ASSERT_EQ(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  fill<<<1, 128, 0, main_stream>>>(a.ptr, 2.0f, n);
  ASSERT_EQ(cudaEventRecord(fork, main_stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);  // the side stream joins the capture
  scale_add<<<1, 128, 0, side>>>(a.ptr, b.ptr, 3.0f, 0.0f, n);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(main_stream, join, 0), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(main_stream, &graph), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, main_stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(main_stream), cudaSuccess);
  EXPECT_EQ(b.download()[n - 1], 6.0f);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(main_stream);
  cudaStreamDestroy(side);
}

TEST(SimtRuntime, CountersPerStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> a(100);
  std::vector<float> host(100, 1.0f);
  const StreamCounters before = stream_counters(s);
  for (int i = 0; i < 5; ++i) fill<<<1, 32, 0, s>>>(a.ptr, 1.0f, 100);
  ASSERT_EQ(cudaMemcpyAsync(a.ptr, host.data(), 400, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), a.ptr, 400, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.ptr, 0, 400, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const StreamCounters c = stream_counters(s);
  const StreamCounters d = c - before;
  EXPECT_EQ(d.kernel_launches, 5u);
  EXPECT_EQ(d.memcpy_host_to_device, 1u);
  EXPECT_EQ(d.memcpy_device_to_host, 1u);
  EXPECT_EQ(d.memcpy_device_to_host_bytes, 400u);
  EXPECT_EQ(d.memsets, 1u);
  EXPECT_EQ(d.host_sync_calls, 2u) << "the pageable download and the stream sync";
  EXPECT_EQ(d.host_syncs, 2u) << "both found work to wait for (the memset was queued after)";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(stream_counters(s).host_syncs, c.host_syncs) << "nothing queued: a call, not a wait";
  EXPECT_EQ(stream_counters(s).host_sync_calls, c.host_sync_calls + 1);
  cudaStreamDestroy(s);
}

// Waits for the previous grid in every thread, or only in thread 0 of each block.
__global__ void wait_then_fill(float* out, int n, bool every_thread) {
  if (every_thread || threadIdx.x == 0) detail::grid_dependency_wait(std::source_location::current());
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 2.0f;
}

// Programmatic launches (the attribute cudaLaunchKernelEx sets on a GPU) are counted, captured ones too, and every
// block in which a thread exits without waiting for the previous grid is reported; ordinary launches need no wait.
TEST(SimtRuntime, ProgrammaticLaunchesAreCountedAndTheirWaitsChecked) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> a(256);
  const StreamCounters before = stream_counters(s);
  const uint64_t unwaited = programmatic_blocks_without_wait();
  wait_then_fill * launch({"wait_then_fill", __FILE__, __LINE__}, 4, 64, 0, s, true)(a.ptr, 256, true);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(programmatic_blocks_without_wait(), unwaited) << "every thread waited";
  wait_then_fill * launch({"wait_then_fill", __FILE__, __LINE__}, 4, 64, 0, s, true)(a.ptr, 256, false);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(programmatic_blocks_without_wait(), unwaited + 4) << "63 threads of each of the 4 blocks did not wait";
  wait_then_fill<<<4, 64, 0, s>>>(a.ptr, 256, false);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(programmatic_blocks_without_wait(), unwaited + 4) << "an ordinary launch needs no wait";
  std::vector<float> host(256);
  ASSERT_EQ(cudaMemcpy(host.data(), a.ptr, 1024, cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) ASSERT_EQ(v, 2.0f);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  wait_then_fill * launch({"wait_then_fill", __FILE__, __LINE__}, 2, 32, 0, s, true)(a.ptr, 64, true);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const StreamCounters d = stream_counters(s) - before;
  EXPECT_EQ(d.kernel_launches, 3u);
  EXPECT_EQ(d.graph_kernel_nodes, 1u);
  EXPECT_EQ(d.programmatic_launches, 3u) << "two launched, one replayed from the graph";
  EXPECT_EQ(programmatic_blocks_without_wait(), unwaited + 4);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace qrt::simt::test
