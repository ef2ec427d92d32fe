#include <cfloat>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/moe/moe.hpp"

namespace qrt::kernels {
namespace {

constexpr int kRouteThreads = 128;  // one warp per token
constexpr int kRouteWarps = kRouteThreads / 32;
constexpr int kCombineThreads = 256;
constexpr int kNoExpert = 0x7fffffff;

// (prob, id) is better than (best_p, best_id): larger probability, or equal probability and lower id.
__device__ __forceinline__ bool better(double p, int id, double best_p, int best_id) {
  return p > best_p || (p == best_p && id < best_id);
}

// Every lane ends with the warp's best (p, id) pair.
__device__ __forceinline__ void warp_best(double& best_p, int& best_id) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const double other_p = __shfl_xor_sync(kFullWarpMask, best_p, offset);
    const int other_id = __shfl_xor_sync(kFullWarpMask, best_id, offset);
    if (better(other_p, other_id, best_p, best_id)) {
      best_p = other_p;
      best_id = other_id;
    }
  }
}

// One warp per token. Lane l owns experts l, l + 32, ..., and marks the ones already selected in a bit mask
// (bit i = expert l + 32 i). Probabilities are recomputed from the logits whenever needed: the same expression
// on the same inputs gives the same double, so ties are seen exactly as the reference sees them.
// No __launch_bounds__: with it ptxas spills a register (54 are used without).
__global__ void moe_route_kernel(const float* __restrict__ logits, int64_t tokens, int experts, int top_k,
                                 bool renormalize, int32_t* __restrict__ ids, float* __restrict__ weights) {
  allow_next_grid();
  wait_for_previous_grid();  // the logits are the router GEMV's (programmatic_launch.cuh)
  const int lane = threadIdx.x % 32;
  const int64_t warps_total = static_cast<int64_t>(gridDim.x) * kRouteWarps;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + threadIdx.x / 32; t < tokens;
       t += warps_total) {
    const float* lt = logits + t * experts;
    double max_v = -DBL_MAX;
    for (int e = lane; e < experts; e += 32) max_v = fmax(max_v, static_cast<double>(lt[e]));
    max_v = warp_max(max_v);
    double sum = 0.0;
    for (int e = lane; e < experts; e += 32) sum += exp(static_cast<double>(lt[e]) - max_v);
    sum = warp_sum(sum);

    uint32_t taken = 0;
    double selected_sum = 0.0;
    int32_t* ids_t = ids + t * top_k;
    float* w_t = weights + t * top_k;
    for (int s = 0; s < top_k; ++s) {
      double best_p = -1.0;  // every real probability is >= 0; NaN never compares better
      int best_id = kNoExpert;
      for (int e = lane, bit = 0; e < experts; e += 32, ++bit) {
        if (taken & (1u << bit)) continue;
        const double p = exp(static_cast<double>(lt[e]) - max_v) / sum;
        if (better(p, e, best_p, best_id)) {
          best_p = p;
          best_id = e;
        }
      }
      warp_best(best_p, best_id);  // every lane now holds the same winner
      if (best_id != kNoExpert && best_id % 32 == lane) taken |= 1u << (best_id / 32);
      if (best_id != kNoExpert) selected_sum += best_p;
      if (lane == 0) {
        ids_t[s] = best_id != kNoExpert ? best_id : -1;
        w_t[s] = best_id != kNoExpert ? static_cast<float>(best_p) : __int_as_float(0x7fc00000);
      }
    }
    if (renormalize && lane == 0) {
      // Weights divided in double, from the same probabilities (recomputed bit-identically).
      for (int s = 0; s < top_k; ++s) {
        const int e = ids_t[s];
        if (e < 0) continue;
        const double p = exp(static_cast<double>(lt[e]) - max_v) / sum;
        w_t[s] = static_cast<float>(p / selected_sum);
      }
    }
  }
}

// One warp per token (a block of 32 threads): scores and choice scores in shared memory, the groups scored by the
// lanes, chosen by lane 0, then top_k warp-wide argmax rounds over the usable experts. The arithmetic is the CPU
// reference's (double, the same comparisons), so the choices agree with it.
__global__ void moe_route_grouped_kernel(const float* __restrict__ logits, int64_t tokens, int experts, int top_k,
                                         MoeRouting r, int32_t* __restrict__ ids, float* __restrict__ weights) {
  __shared__ double score[kMaxGroupedRoutedExperts], choice[kMaxGroupedRoutedExperts];
  __shared__ double group_score[kMaxExpertGroups];
  __shared__ unsigned char usable[kMaxGroupedRoutedExperts];
  allow_next_grid();
  wait_for_previous_grid();
  const int lane = threadIdx.x;
  const int groups = r.groups > 1 ? r.groups : 1, per_group = experts / groups;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* lt = logits + t * experts;
    if (r.sigmoid) {
      for (int e = lane; e < experts; e += 32) score[e] = 1.0 / (1.0 + exp(-static_cast<double>(lt[e])));
    } else {
      double max_v = -DBL_MAX;
      for (int e = lane; e < experts; e += 32) max_v = fmax(max_v, static_cast<double>(lt[e]));
      max_v = warp_max(max_v);
      double sum = 0.0;
      for (int e = lane; e < experts; e += 32) sum += exp(static_cast<double>(lt[e]) - max_v);
      sum = warp_sum(sum);
      for (int e = lane; e < experts; e += 32) score[e] = exp(static_cast<double>(lt[e]) - max_v) / sum;
    }
    for (int e = lane; e < experts; e += 32) {
      choice[e] = score[e] + (r.choice_bias != nullptr ? static_cast<double>(r.choice_bias[e]) : 0.0);
      usable[e] = groups <= 1;
    }
    __syncwarp();
    if (groups > 1) {
      for (int g = lane; g < groups; g += 32) {
        double first = -INFINITY, second = -INFINITY;
        for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
          const double c = choice[e];
          if (c > first) {
            second = first;
            first = c;
          } else if (c > second) {
            second = c;
          }
        }
        group_score[g] = r.group_top2 ? first + second : first;
      }
      __syncwarp();
      if (lane == 0) {
        uint64_t group_taken = 0;
        for (int k = 0; k < r.groups_used; ++k) {
          int best = -1;
          for (int g = 0; g < groups; ++g)
            if (!(group_taken >> g & 1) && (best < 0 || better(group_score[g], g, group_score[best], best))) best = g;
          group_taken |= uint64_t{1} << best;
          for (int e = best * per_group; e < (best + 1) * per_group; ++e) usable[e] = 1;
        }
      }
      __syncwarp();
    }
    int32_t* ids_t = ids + t * top_k;
    double selected_sum = 0.0;
    int chosen = 0;
    for (int s = 0; s < top_k; ++s) {
      double best_c = -INFINITY;
      int best_id = kNoExpert;
      for (int e = lane; e < experts; e += 32) {
        const double c = choice[e];
        if (usable[e] && !isnan(c) && better(c, e, best_c, best_id)) {
          best_c = c;
          best_id = e;
        }
      }
      warp_best(best_c, best_id);
      if (lane == 0) ids_t[s] = best_id != kNoExpert ? best_id : -1;
      if (best_id != kNoExpert) {
        selected_sum += score[best_id];
        ++chosen;
        if (lane == 0) usable[best_id] = 0;
      }
      __syncwarp();
    }
    if (lane == 0) {
      for (int s = 0; s < top_k; ++s) {
        const int e = ids_t[s];
        double w = e < 0 ? __longlong_as_double(0x7ff8000000000000ll) : score[e];
        if (r.renormalize && chosen > 0) w /= selected_sum;
        weights[t * top_k + s] = static_cast<float>(w * r.scale);
      }
    }
    __syncwarp();
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ weights, int64_t tokens,
                                   int top_k, int64_t dim, float* __restrict__ out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t n = tokens * dim;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t t = idx / dim;
    const int64_t i = idx % dim;
    float acc = 0.0f;
    for (int s = 0; s < top_k; ++s) acc += weights[t * top_k + s] * y[(t * top_k + s) * dim + i];
    out[idx] = acc;
  }
}

}  // namespace

Status moe_route(const float* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
                 float* weights, cudaStream_t stream) {
  if (tokens < 0 || experts <= 0 || top_k <= 0 || top_k > experts)
    return invalid_argument("moe_route: needs 1 <= top_k (" + std::to_string(top_k) + ") <= experts (" +
                            std::to_string(experts) + ")");
  if (experts > kMaxRoutedExperts)
    return unsupported("moe_route: " + std::to_string(experts) + " experts (the CUDA router handles up to " +
                       std::to_string(kMaxRoutedExperts) + ")");
  if (tokens == 0) return ok_status();
  const unsigned blocks = grid_for(tokens, kRouteWarps);
  return launch_programmatic("moe_route_kernel", moe_route_kernel, blocks, kRouteThreads, 0, stream, logits, tokens,
                             experts, top_k, renormalize, ids, weights);
}

Status moe_route_grouped(const float* logits, int64_t tokens, int experts, int top_k, const MoeRouting& routing,
                         int32_t* ids, float* weights, cudaStream_t stream) {
  if (tokens < 0 || experts <= 0 || top_k <= 0 || top_k > experts || experts > kMaxGroupedRoutedExperts ||
      routing.groups > kMaxExpertGroups || experts % (routing.groups > 1 ? routing.groups : 1) != 0)
    return invalid_argument("moe_route_grouped: " + std::to_string(experts) + " experts, top_k " +
                            std::to_string(top_k) + ", " + std::to_string(routing.groups) + " groups (at most " +
                            std::to_string(kMaxGroupedRoutedExperts) + " experts in " +
                            std::to_string(kMaxExpertGroups) + " equal groups)");
  if (tokens == 0) return ok_status();
  return launch_programmatic("moe_route_grouped_kernel", moe_route_grouped_kernel, grid_for(tokens, 1), 32, 0, stream,
                             logits, tokens, experts, top_k, routing, ids, weights);
}

Status moe_combine(const float* y, const float* weights, int64_t tokens, int top_k, int64_t dim, float* out,
                   cudaStream_t stream) {
  if (tokens < 0 || top_k <= 0 || dim < 0)
    return invalid_argument("moe_combine: bad shape (tokens " + std::to_string(tokens) + ", top_k " +
                            std::to_string(top_k) + ", dim " + std::to_string(dim) + ")");
  const int64_t n = tokens * dim;
  if (n == 0) return ok_status();
  return launch_programmatic("moe_combine_kernel", moe_combine_kernel, grid_for(n, kCombineThreads), kCombineThreads,
                             0, stream, y, weights, tokens, top_k, dim, out);
}

}  // namespace qrt::kernels
