#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/moe/expert_gemv.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kGroupThreads = 1024;
// Slots of one expert a warp multiplies per pass over its row: the decoded weights are used this many times.
constexpr int kSlotsPerPass = 8;

// One block: slots counted per expert in shared memory, offsets by an exclusive scan (one thread: a few hundred
// experts), then each slot placed in its expert's list. The order inside a list depends on the atomics, which is
// harmless: each slot's output is computed alone. A slot with an id outside [0, experts) gets a NaN row here, as
// the per-slot kernel gives it.
__global__ void __launch_bounds__(kGroupThreads) group_slots_kernel(const int32_t* __restrict__ ids, int64_t slots,
                                                                    int experts, int64_t rows,
                                                                    int32_t* __restrict__ offsets,
                                                                    int32_t* __restrict__ order,
                                                                    float* __restrict__ y) {
  extern __shared__ int32_t cursor[];  // [experts]
  allow_next_grid();
  wait_for_previous_grid();  // the ids are the router's (programmatic_launch.cuh)
  for (int e = threadIdx.x; e < experts; e += blockDim.x) cursor[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < experts) {
      atomicAdd(&cursor[e], 1);
    } else {
      for (int64_t r = 0; r < rows; ++r) y[s * rows + r] = __int_as_float(0x7fc00000);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t sum = 0;
    for (int e = 0; e < experts; ++e) {
      const int32_t n = cursor[e];
      offsets[e] = sum;
      cursor[e] = sum;
      sum += n;
    }
    offsets[experts] = sum;
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < experts) order[atomicAdd(&cursor[e], 1)] = static_cast<int32_t>(s);
  }
}

// grid.x covers the output rows (kWarpsPerBlock per block), grid.y the experts. Lane l takes blocks l, l + 32, ...
// of its row for every slot and the warp sums at the end: the order of the per-slot kernel, so the same bits.
template <class Traits>
__global__ void grouped_expert_gemv_kernel(quant::QuantView w, quant::PartSizes per_expert,
                                           const int32_t* __restrict__ offsets, const int32_t* __restrict__ order,
                                           int top_k, bool shared_input, const float* __restrict__ x,
                                           float* __restrict__ y) {
  const int e = blockIdx.y;
  const int32_t begin = offsets[e], end = offsets[e + 1];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (begin == end || row >= w.rows) return;
  quant::QuantView v = w;
  v.data += static_cast<uint64_t>(e) * per_expert.data;
  if (v.scales != nullptr) v.scales += static_cast<uint64_t>(e) * per_expert.scales;
  if (v.biases != nullptr) v.biases += static_cast<uint64_t>(e) * per_expert.biases;

  constexpr int kFixed = Traits::block_elems;
  const int be = quant::block_elems_for(kFixed, v.params);
  const int64_t nblocks = v.cols / be;
  float buf[kFixed != 0 ? kFixed : quant::kMaxBlockElems];
  // Each lane's partial sums of the pass's slots live in shared memory (lane-indexed, conflict free): 8 more
  // accumulators, and 8 row pointers, in registers beside the decoded block made ptxas spill.
  __shared__ float partial[kWarpsPerBlock][kSlotsPerPass][32];
  float(&acc)[kSlotsPerPass][32] = partial[threadIdx.x / 32];
  for (int32_t c0 = begin; c0 < end; c0 += kSlotsPerPass) {
    const int n = end - c0 < kSlotsPerPass ? end - c0 : kSlotsPerPass;
    for (int i = 0; i < n; ++i) acc[i][lane] = 0.0f;
    for (int64_t b = lane; b < nblocks; b += 32) {
      Traits::decode_block(v, row, b, buf);
      for (int i = 0; i < n; ++i) {
        const int64_t slot = order[c0 + i];
        const float* xb = x + (shared_input ? slot / top_k : slot) * v.cols + b * be;
        float a = acc[i][lane];
        // Not unrolled whole: a 256-element block held in registers across the slots made ptxas spill.
#pragma unroll 4
        for (int j = 0; j < be; ++j) a += buf[j] * xb[j];
        acc[i][lane] = a;
      }
    }
    for (int i = 0; i < n; ++i) {
      const float sum = warp_sum(acc[i][lane]);
      if (lane == 0) y[static_cast<int64_t>(order[c0 + i]) * v.rows + row] = sum;
    }
  }
}

}  // namespace

Status group_expert_slots(const int32_t* ids, const ExpertGemvShape& s, int64_t rows, float* y, void* workspace,
                          cudaStream_t stream, ExpertSlotLists* lists) {
  if (s.tokens < 0 || s.top_k <= 0 || s.experts <= 0 || rows <= 0)
    return invalid_argument("group_expert_slots: bad shape (tokens " + std::to_string(s.tokens) + ", top_k " +
                            std::to_string(s.top_k) + ", experts " + std::to_string(s.experts) + ", rows " +
                            std::to_string(rows) + ")");
  if (s.experts > kGroupedMaxExperts)
    return unsupported("group_expert_slots: " + std::to_string(s.experts) + " experts (at most " +
                       std::to_string(kGroupedMaxExperts) + ")");
  const int64_t slots = s.tokens * s.top_k;
  if (slots > INT32_MAX) return unsupported("group_expert_slots: more than 2^31 slots");
  if (workspace == nullptr || ids == nullptr || y == nullptr)
    return invalid_argument("group_expert_slots: null ids, output or workspace");
  auto* offsets = static_cast<int32_t*>(workspace);
  int32_t* order = offsets + s.experts + 1;
  QRT_TRY(launch_programmatic("group_slots_kernel", group_slots_kernel, 1, kGroupThreads,
                              static_cast<size_t>(s.experts) * sizeof(int32_t), stream, ids, slots, s.experts, rows,
                              offsets, order, y));
  *lists = {offsets, order};
  return ok_status();
}

uint64_t expert_gemv_grouped_workspace_bytes(const ExpertGemvShape& s) {
  const uint64_t slots = s.tokens > 0 && s.top_k > 0 ? static_cast<uint64_t>(s.tokens) * s.top_k : 0;
  return (static_cast<uint64_t>(s.experts > 0 ? s.experts : 0) + 1 + slots) * sizeof(int32_t);
}

Status expert_gemv_grouped(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                           const int32_t* ids, const ExpertGemvShape& s, const float* x, float* y, void* workspace,
                           cudaStream_t stream) {
  if (expert0.rows <= 0 || expert0.cols <= 0)
    return invalid_argument("expert_gemv_grouped: bad matrix [" + std::to_string(expert0.rows) + ", " +
                            std::to_string(expert0.cols) + "]");
  if (s.tokens == 0 && s.top_k > 0 && s.experts > 0) return ok_status();  // no slots (other shapes: refused below)
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, expert0.params);
    if (be <= 0 || be > quant::kMaxBlockElems || expert0.cols % be != 0)
      return invalid_argument("expert_gemv_grouped: row length " + std::to_string(expert0.cols) +
                              " is not a whole number of blocks of " + std::to_string(be));
    ExpertSlotLists lists;
    QRT_TRY(group_expert_slots(ids, s, expert0.rows, y, workspace, stream, &lists).with_context("expert_gemv_grouped"));
    const int32_t* offsets = lists.offsets;
    const int32_t* order = lists.order;
    const dim3 grid(static_cast<unsigned>((expert0.rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                    static_cast<unsigned>(s.experts));
    grouped_expert_gemv_kernel<T><<<grid, kWarpsPerBlock * 32, 0, stream>>>(expert0, per_expert, offsets, order,
                                                                             s.top_k, s.shared_input, x, y);
    return cuda_launch_status("grouped_expert_gemv_kernel");
  });
}

}  // namespace qrt::kernels
