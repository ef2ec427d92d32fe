// The SIMT layer's execution model against what CUDA documents: thread and block indices, barriers, warp shuffles
// and votes with partial masks and widths (expected values computed here from the documented rules), atomics across
// blocks running in parallel, shared memory, cp.async, and the fact that a missing barrier gives wrong results
// deterministically.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "simt_test_util.hpp"

namespace qrt::simt::test {
namespace {

// ---- indices ---------------------------------------------------------------------------------------------------

__global__ void write_coordinates(uint32_t* out) {
  const uint32_t block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const uint32_t thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const uint32_t per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + thread] = (block << 16) | thread;
}

TEST(SimtExecution, EveryThreadOfA3dGridRunsOnceWithItsCoordinates) {
  const dim3 grid(3, 2, 2), block(8, 4, 2);
  const size_t n = 12 * 64;
  DeviceArray<uint32_t> out(n);
  write_coordinates<<<grid, block>>>(out.ptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto got = out.download();
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], ((i / 64) << 16) | (i % 64)) << i;
}

// ---- barriers --------------------------------------------------------------------------------------------------

// Each thread writes its slot, then reads its neighbour's: right only with the barrier in between.
template <bool kBarrier>
__global__ void rotate_through_shared(const float* in, float* out) {
  extern __shared__ float slots[];
  const int i = threadIdx.x, n = blockDim.x;
  slots[i] = in[blockIdx.x * n + i];
  if (kBarrier) __syncthreads();
  out[blockIdx.x * n + i] = slots[(i + 1) % n];
}

TEST(SimtExecution, ABarrierOrdersSharedMemoryAndAMissingOneIsWrongEveryTime) {
  const int blocks = 5, threads = 96;
  std::vector<float> in(blocks * threads);
  std::iota(in.begin(), in.end(), 1.0f);
  DeviceArray<float> din(in), dout(in.size());
  rotate_through_shared<true><<<blocks, threads, threads * sizeof(float)>>>(din.ptr, dout.ptr);
  auto got = dout.download();
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < threads; ++i) EXPECT_EQ(got[b * threads + i], in[b * threads + (i + 1) % threads]);

  // Without the barrier, thread i runs to its end before thread i + 1 starts: it reads the poisoned (NaN) slot.
  for (int run = 0; run < 2; ++run) {
    rotate_through_shared<false><<<blocks, threads, threads * sizeof(float)>>>(din.ptr, dout.ptr);
    got = dout.download();
    for (int b = 0; b < blocks; ++b) {
      for (int i = 0; i + 1 < threads; ++i) EXPECT_TRUE(std::isnan(got[b * threads + i])) << b << " " << i;
      EXPECT_EQ(got[b * threads + threads - 1], in[b * threads]);  // slot 0 was written before the last thread ran
    }
  }
}

__global__ void count_barrier(const int* flags, int* out) {
  const int f = flags[threadIdx.x];
  out[0 * blockDim.x + threadIdx.x] = __syncthreads_count(f);
  out[1 * blockDim.x + threadIdx.x] = __syncthreads_and(f);
  out[2 * blockDim.x + threadIdx.x] = __syncthreads_or(f);
}

TEST(SimtExecution, SyncthreadsCountAndOr) {
  const int n = 70;
  std::vector<int> flags(n, 0);
  for (int i = 0; i < n; i += 3) flags[i] = 1 + i;  // 24 non-zero
  DeviceArray<int> dflags(flags), dout(3 * n);
  count_barrier<<<1, n>>>(dflags.ptr, dout.ptr);
  const auto got = dout.download();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i], 24);
    EXPECT_EQ(got[n + i], 0);
    EXPECT_EQ(got[2 * n + i], 1);
  }
}

// ---- shuffles and votes ------------------------------------------------------------------------------------------

enum Kind { kIdx, kUp, kDown, kXor };

template <class T>
__global__ void shuffle_kernel(const T* in, T* out, int kind, int arg_base, int width, unsigned mask) {
  const int lane = threadIdx.x % 32;
  if (((mask >> lane) & 1u) == 0) return;  // lanes outside the mask take no part
  const T v = in[threadIdx.x];
  T r{};
  const int arg = kind == kIdx ? (arg_base + lane * 7) : arg_base;  // idx: a different source per lane
  switch (kind) {
    case kIdx: r = __shfl_sync(mask, v, arg, width); break;
    case kUp: r = __shfl_up_sync(mask, v, static_cast<unsigned>(arg), width); break;
    case kDown: r = __shfl_down_sync(mask, v, static_cast<unsigned>(arg), width); break;
    case kXor: r = __shfl_xor_sync(mask, v, arg, width); break;
  }
  out[threadIdx.x] = r;
}

// The documented source lane (CUDA Programming Guide, warp shuffle functions).
int source_lane(int kind, int lane, int arg_base, int width) {
  const int segment = lane / width * width;
  switch (kind) {
    case kIdx: return segment + ((arg_base + lane * 7) % width + width) % width;
    case kUp: return lane - segment >= arg_base ? lane - arg_base : lane;
    case kDown: return lane - segment + arg_base < width ? lane + arg_base : lane;
    default: {
      const int s = lane ^ arg_base;
      return s >= segment + width ? lane : s;
    }
  }
}

TEST(SimtExecution, ShufflesFollowTheDocumentedLaneRules) {
  std::vector<double> in(64);
  for (int i = 0; i < 64; ++i) in[i] = 1000.5 + i;
  DeviceArray<double> din(in), dout(64);
  for (int kind : {kIdx, kUp, kDown, kXor})
    for (int width : {32, 16, 8, 4})
      for (int arg : {0, 1, 3, 5}) {
        shuffle_kernel<double><<<1, 64>>>(din.ptr, dout.ptr, kind, arg, width, 0xffffffffu);
        const auto got = dout.download();
        for (int t = 0; t < 64; ++t) {
          const int src = (t / 32) * 32 + source_lane(kind, t % 32, arg, width);
          EXPECT_EQ(got[t], in[src]) << "kind " << kind << " width " << width << " arg " << arg << " thread " << t;
        }
      }
}

TEST(SimtExecution, ShufflesWithinAPartialMask) {
  std::vector<int> in(32);
  for (int i = 0; i < 32; ++i) in[i] = 7 * i + 1;
  DeviceArray<int> din(in), dout(std::vector<int>(32, -1));
  // The even lanes exchange with xor 2 (staying even): the odd lanes never take part.
  shuffle_kernel<int><<<1, 32>>>(din.ptr, dout.ptr, kXor, 2, 32, 0x55555555u);
  const auto got = dout.download();
  for (int l = 0; l < 32; ++l) EXPECT_EQ(got[l], l % 2 == 0 ? in[l ^ 2] : -1) << l;
}

__global__ void votes(const int* pred, unsigned* out) {
  const int lane = threadIdx.x % 32;
  const unsigned mask = lane < 20 ? 0x000fffffu : 0xfff00000u;  // two groups voting separately
  const int p = pred[threadIdx.x];
  // Before any lane has exited, every lane of the warp is active (after it, lanes that ran ahead and exited are
  // not: the layer runs them one after another).
  out[4 * threadIdx.x + 3] = __activemask();
  out[4 * threadIdx.x + 0] = __ballot_sync(mask, p);
  out[4 * threadIdx.x + 1] = static_cast<unsigned>(__any_sync(mask, p));
  out[4 * threadIdx.x + 2] = static_cast<unsigned>(__all_sync(mask, p));
}

TEST(SimtExecution, VotesPerMaskGroup) {
  std::vector<int> pred(64, 0);
  for (int i : {1, 4, 19, 33, 36, 51}) pred[i] = 1;
  for (int i = 52; i < 64; ++i) pred[i] = 1;  // warp 1's upper group: all true
  DeviceArray<int> dp(pred);
  DeviceArray<unsigned> dout(4 * 64);
  votes<<<1, 64>>>(dp.ptr, dout.ptr);
  const auto got = dout.download();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, base = t / 32 * 32;
    const unsigned mask = lane < 20 ? 0x000fffffu : 0xfff00000u;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
      if (((mask >> l) & 1u) && pred[base + l]) ballot |= 1u << l;
    EXPECT_EQ(got[4 * t], ballot) << t;
    EXPECT_EQ(got[4 * t + 1], ballot != 0u) << t;
    EXPECT_EQ(got[4 * t + 2], ballot == mask) << t;
    EXPECT_EQ(got[4 * t + 3], 0xffffffffu) << t;
  }
}

// ---- the layer's warp gather (the model of mma.sync and ldmatrix, not a CUDA call) ----------------------------

struct GatherPayload {
  uint32_t word;
  float value;
  uint16_t half[3];
};

// Two mask groups per warp (lanes 0..11 and 12..31) gather separately; a slot of a lane outside the group keeps the
// marker it was given.
__global__ void gather_groups(GatherPayload* out) {
  const int lane = threadIdx.x % 32;
  const unsigned mask = lane < 12 ? 0x00000fffu : 0xfffff000u;
  const GatherPayload mine{1000u * threadIdx.x + 7u, 0.5f * static_cast<float>(threadIdx.x),
                           {static_cast<uint16_t>(lane), static_cast<uint16_t>(threadIdx.x / 32), 0xBEEFu}};
  GatherPayload all[32];
  for (GatherPayload& p : all) p = GatherPayload{0xFFFFFFFFu, -1.0f, {0, 0, 0}};
  qrt::simt::detail::warp_gather(mask, &mine, all, sizeof mine);
  for (int l = 0; l < 32; ++l) out[threadIdx.x * 32 + l] = all[l];
}

TEST(SimtExecution, AWarpGatherHandsEveryLaneOfItsMaskEachLanesBytes) {
  DeviceArray<GatherPayload> dout(64 * 32);
  gather_groups<<<1, 64>>>(dout.ptr);
  const auto got = dout.download();
  for (int t = 0; t < 64; ++t) {
    const bool low = t % 32 < 12;
    for (int l = 0; l < 32; ++l) {
      const GatherPayload& g = got[static_cast<size_t>(t * 32 + l)];
      const int from = t / 32 * 32 + l;
      if ((l < 12) == low) {
        EXPECT_EQ(g.word, 1000u * from + 7u) << t << " " << l;
        EXPECT_EQ(g.value, 0.5f * static_cast<float>(from)) << t << " " << l;
        EXPECT_EQ(g.half[0], l);
        EXPECT_EQ(g.half[1], t / 32);
        EXPECT_EQ(g.half[2], 0xBEEFu);
      } else {
        EXPECT_EQ(g.word, 0xFFFFFFFFu) << "thread " << t << " got lane " << l << "'s bytes from outside its mask";
      }
    }
  }
}

// ---- atomics ---------------------------------------------------------------------------------------------------

__global__ void histogram(const uint32_t* values, int n, uint32_t* bins, unsigned long long* total, float* fsum) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&bins[values[i] % 16], 1u);
    atomicAdd(total, static_cast<unsigned long long>(values[i]));
    atomicAdd(fsum, 0.5f);
    atomicMax(&bins[16], values[i]);
  }
}

TEST(SimtExecution, AtomicsAcrossBlocksRunningInParallel) {
  const int n = 50000;
  std::vector<uint32_t> values(n);
  for (int i = 0; i < n; ++i) values[i] = static_cast<uint32_t>((i * 2654435761u) >> 7);
  DeviceArray<uint32_t> dv(values), bins(std::vector<uint32_t>(17, 0));
  DeviceArray<unsigned long long> total(std::vector<unsigned long long>{0});
  DeviceArray<float> fsum(std::vector<float>{0.0f});
  histogram<<<64, 128>>>(dv.ptr, n, bins.ptr, total.ptr, fsum.ptr);
  std::vector<uint32_t> want(17, 0);
  unsigned long long want_total = 0;
  for (uint32_t v : values) {
    want[v % 16]++;
    want[16] = std::max(want[16], v);
    want_total += v;
  }
  EXPECT_EQ(bins.download(), want);
  EXPECT_EQ(total.download()[0], want_total);
  EXPECT_EQ(fsum.download()[0], 25000.0f);  // halves add exactly
}

// ---- shared memory and cp.async ----------------------------------------------------------------------------------

// Each block reads its dynamic shared memory before writing it: every block must see the poison (0xFF) again.
__global__ void read_fresh_shared(uint32_t* out) {
  extern __shared__ __align__(16) uint32_t words[];
  out[blockIdx.x * blockDim.x + threadIdx.x] = words[threadIdx.x];
  __syncthreads();
  words[threadIdx.x] = 0x12345678u;
}

TEST(SimtExecution, DynamicSharedMemoryIsPoisonedInEveryBlock) {
  DeviceArray<uint32_t> out(4 * 64);
  read_fresh_shared<<<4, 64, 64 * 4>>>(out.ptr);
  for (uint32_t v : out.download()) EXPECT_EQ(v, 0xffffffffu);
}

// cp.async lands in shared memory when the issuing thread waits for its group, not before.
__global__ void async_copies(const uint4* src, uint32_t* out) {
  extern __shared__ __align__(16) uint4 stage[];
  const int t = threadIdx.x;
  qrt::simt::detail::async_copy(&stage[t], &src[t], 16, std::source_location::current());
  qrt::simt::detail::async_commit();
  qrt::simt::detail::async_copy(&stage[blockDim.x + t], &src[blockDim.x + t], 16, std::source_location::current());
  qrt::simt::detail::async_commit();
  out[4 * t + 0] = stage[t].x;  // not waited for yet: still the poison
  qrt::simt::detail::async_wait(1, std::source_location::current());  // the first group has landed, the second not
  out[4 * t + 1] = stage[t].x;
  out[4 * t + 2] = stage[blockDim.x + t].x;
  qrt::simt::detail::async_wait(0, std::source_location::current());
  out[4 * t + 3] = stage[blockDim.x + t].x;
}

TEST(SimtExecution, AsyncCopiesLandAtTheirWait) {
  const int threads = 32;
  std::vector<uint32_t> words(2 * threads * 4);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 3 + 1);
  DeviceArray<uint32_t> src(words), out(4 * threads);
  async_copies<<<1, threads, 2 * threads * 16>>>(reinterpret_cast<const uint4*>(src.ptr), out.ptr);
  const auto got = out.download();
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(got[4 * t + 0], 0xffffffffu);
    EXPECT_EQ(got[4 * t + 1], words[4 * t]);
    EXPECT_EQ(got[4 * t + 2], 0xffffffffu);
    EXPECT_EQ(got[4 * t + 3], words[4 * (threads + t)]);
  }
}

// Static __shared__ is one object per block in flight: blocks running on different OS threads do not share it.
__global__ void static_shared_sum(const int* in, int* out) {
  __shared__ int partial[4];
  if (threadIdx.x < 4) partial[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&partial[threadIdx.x % 4], in[blockIdx.x * blockDim.x + threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0] + partial[1] + partial[2] + partial[3];
}

TEST(SimtExecution, StaticSharedMemoryIsPerBlock) {
  const int blocks = 200, threads = 64;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 97);
  DeviceArray<int> din(in), dout(blocks);
  static_shared_sum<<<blocks, threads>>>(din.ptr, dout.ptr);
  const auto got = dout.download();
  for (int b = 0; b < blocks; ++b) {
    int want = 0;
    for (int i = 0; i < threads; ++i) want += in[b * threads + i];
    EXPECT_EQ(got[b], want) << b;
  }
}

}  // namespace
}  // namespace qrt::simt::test
