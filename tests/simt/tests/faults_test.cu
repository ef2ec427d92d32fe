// What the SIMT layer refuses to run: each kernel below breaks one rule a GPU leaves undefined or faults on, and the
// layer must stop the program with a message naming the kernel, the block, the thread and the rule. Death tests run
// in a fresh copy of the process ("threadsafe" style) because the layer keeps worker threads.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "simt_test_util.hpp"

namespace qrt::simt::test {
namespace {

class SimtFaults : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Runs a kernel and waits for it (the fault happens when the device runs it).
#define RUN_KERNEL(...)                 \
  do {                                  \
    __VA_ARGS__;                        \
    (void)cudaDeviceSynchronize();      \
  } while (0)

__global__ void mask_without_self(int* out) {
  const int lane = threadIdx.x % 32;
  out[lane] = __shfl_sync(0x0000ffffu, lane, 0);  // lanes 16..31 call it with a mask that leaves them out
}

TEST_F(SimtFaults, ALaneOutsideItsMask) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(mask_without_self<<<1, 32>>>(out.ptr)),
               "kernel mask_without_self .*block \\(0,0,0\\) thread \\(16,0,0\\).*__shfl_sync.*mask 0x0000ffff.*does "
               "not name the calling lane 16");
}

__global__ void partial_barrier(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(SimtFaults, ABarrierOnlyPartOfTheBlockReaches) {
  DeviceArray<int> out(64);
  EXPECT_DEATH(RUN_KERNEL(partial_barrier<<<2, 64>>>(out.ptr)),
               "kernel partial_barrier .*thread \\(16,0,0\\): exits while 16 threads of its block wait at "
               "__syncthreads .*a barrier that only part of the block reaches");
}

__global__ void barrier_after_exit(int* out) {
  if (threadIdx.x == 0) return;  // thread 0 runs first and exits before any thread reaches the barrier
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(SimtFaults, ABarrierAfterAThreadExited) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(barrier_after_exit<<<1, 32>>>(out.ptr)),
               "reaches __syncthreads at faults_test.cu:[0-9]+ after thread \\(0,0,0\\) of its block exited");
}

__global__ void different_barriers(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

TEST_F(SimtFaults, ThreadsAtDifferentBarriers) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(different_barriers<<<1, 32>>>(out.ptr)), "threads of one block at different barriers");
}

__global__ void shuffle_from_exited(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

TEST_F(SimtFaults, AShuffleFromAnExitedLane) {
  DeviceArray<float> out(32);
  EXPECT_DEATH(RUN_KERNEL(shuffle_from_exited<<<1, 32>>>(out.ptr)),
               "(exits while lanes 0x0000ffff of its warp wait for it in __shfl_xor_sync|lanes .* have exited)");
}

__global__ void shuffle_outside_mask(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 16);  // reads lanes 16..31
}

TEST_F(SimtFaults, AShuffleReadingALaneOutsideTheMask) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(shuffle_outside_mask<<<1, 32>>>(out.ptr)),
               "lane 0 reads lane 16, which is not in the mask 0x0000ffff");
}

__global__ void shuffle_against_barrier(int* out) {
  if (threadIdx.x % 32 == 0) {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  } else {
    __syncthreads();
  }
}

TEST_F(SimtFaults, AWarpSplitBetweenAShuffleAndABarrierNeverFinishes) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(shuffle_against_barrier<<<1, 32>>>(out.ptr)),
               "block \\(0,0,0\\) can never finish: thread \\(0,0,0\\) waits in __shfl_sync.*waits in __syncthreads");
}

__global__ void gather_against_shuffle(int* out) {
  const int lane = threadIdx.x % 32;
  if (lane < 16) {
    int all[32];
    qrt::simt::detail::warp_gather(0xffffffffu, &lane, all, sizeof lane);
    out[lane] = all[31 - lane];
  } else {
    out[lane] = __shfl_sync(0xffffffffu, lane, 0);
  }
}

TEST_F(SimtFaults, AWarpGatherMetByAShuffle) {
  DeviceArray<int> out(32);
  EXPECT_DEATH(RUN_KERNEL(gather_against_shuffle<<<1, 32>>>(out.ptr)),
               "thread \\(16,0,0\\).*__shfl_sync\\(mask 0xffffffff\\).*while lanes 0x0000ffff of its warp wait in a "
               "warp gather.*must all make the same warp-synchronous call");
}

__global__ void misaligned_vector(const float* in, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(in + 1);  // 4 bytes past a 16-byte boundary
  out[threadIdx.x] = v.x;
}

TEST_F(SimtFaults, AMisalignedVectorLoad) {
  DeviceArray<float> in(64), out(32);
  EXPECT_DEATH(RUN_KERNEL(misaligned_vector<<<1, 32>>>(in.ptr, out.ptr)),
               "kernel misaligned_vector .*thread \\(0,0,0\\): misaligned float4 access .*16-byte alignment");
}

__global__ void read_past_end(const float* in, int n, float* out) {
  out[threadIdx.x] = in[n + threadIdx.x];  // just past the allocation: its guard page
}

TEST_F(SimtFaults, AnOutOfBoundsRead) {
  DeviceArray<float> in(1024), out(32);
  EXPECT_DEATH(RUN_KERNEL(read_past_end<<<1, 32>>>(in.ptr, 1024, out.ptr)),
               "kernel read_past_end .*block \\(0,0,0\\) thread \\(0,0,0\\): invalid memory access at .* bytes past "
               "the end of a 4096-byte allocation");
}

__global__ void read_freed(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }

TEST_F(SimtFaults, AReadOfFreedMemory) {
  DeviceArray<float> out(32);
  float* gone = nullptr;
  ASSERT_EQ(cudaMalloc(&gone, 4096), cudaSuccess);
  ASSERT_EQ(cudaFree(gone), cudaSuccess);
  EXPECT_DEATH(RUN_KERNEL(read_freed<<<1, 32>>>(gone, out.ptr)), "inside a freed 4096-byte allocation");
}

__global__ void unwaited_async_copy(const uint4* src) {
  extern __shared__ __align__(16) uint4 stage[];
  qrt::simt::detail::async_copy(&stage[threadIdx.x], &src[threadIdx.x], 16, std::source_location::current());
  qrt::simt::detail::async_commit();
}

TEST_F(SimtFaults, AnAsyncCopyNeverWaitedFor) {
  DeviceArray<uint32_t> src(128);
  EXPECT_DEATH(RUN_KERNEL(unwaited_async_copy<<<1, 32, 32 * 16>>>(reinterpret_cast<const uint4*>(src.ptr))),
               "1 cp.async copies were never waited for when the thread exited");
}

__global__ void partial_warp_full_mask(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 2.0f, 1);
}

TEST_F(SimtFaults, AFullMaskInAPartialWarp) {
  DeviceArray<float> out(48);
  EXPECT_DEATH(RUN_KERNEL(partial_warp_full_mask<<<1, 48>>>(out.ptr)),
               "names lanes 0xffff0000 that the block \\(48 threads\\) does not have");
}

__global__ void trap_kernel() { __trap(); }

TEST_F(SimtFaults, ATrap) {
  EXPECT_DEATH(RUN_KERNEL(trap_kernel<<<1, 1>>>()), "kernel trap_kernel .*__trap\\(\\) at faults_test.cu");
}

}  // namespace
}  // namespace qrt::simt::test
