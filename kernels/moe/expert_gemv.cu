#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/moe/expert_gemv.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int64_t kMaxSlotsPerLaunch = 65535;  // grid.y limit

// grid.x covers the output rows (kWarpsPerBlock per block), grid.y the slots of this launch.
// No __launch_bounds__: with it ptxas spills a few registers in the i-quant instances (IQ3_XXS, IQ3_S).
template <class Traits>
__global__ void expert_gemv_kernel(quant::QuantView w, quant::PartSizes per_expert, int experts,
                                   const int32_t* __restrict__ ids, int64_t first_slot, int top_k, bool shared_input,
                                   const float* __restrict__ x, float* __restrict__ y) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= w.rows) return;
  const int64_t slot = first_slot + blockIdx.y;
  const int e = ids[slot];
  float* y_out = y + slot * w.rows + row;
  if (e < 0 || e >= experts) {
    if (lane == 0) *y_out = __int_as_float(0x7fc00000);
    return;
  }
  quant::QuantView v = w;
  v.data += static_cast<uint64_t>(e) * per_expert.data;
  if (v.scales != nullptr) v.scales += static_cast<uint64_t>(e) * per_expert.scales;
  if (v.biases != nullptr) v.biases += static_cast<uint64_t>(e) * per_expert.biases;
  const float* xr = x + (shared_input ? slot / top_k : slot) * w.cols;

  constexpr int kFixed = Traits::block_elems;
  const int be = quant::block_elems_for(kFixed, v.params);
  const int64_t nblocks = v.cols / be;
  float buf[kFixed != 0 ? kFixed : quant::kMaxBlockElems];
  float acc = 0.0f;
  for (int64_t b = lane; b < nblocks; b += 32) {
    Traits::decode_block(v, row, b, buf);
    const float* xb = xr + b * be;
    for (int j = 0; j < be; ++j) acc += buf[j] * xb[j];
  }
  acc = warp_sum(acc);
  if (lane == 0) *y_out = acc;
}

}  // namespace

Status expert_gemv(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                   const int32_t* ids, const ExpertGemvShape& s, const float* x, float* y, cudaStream_t stream) {
  if (s.tokens < 0 || s.top_k <= 0 || s.experts <= 0 || expert0.rows <= 0 || expert0.cols <= 0)
    return invalid_argument("expert_gemv: bad shape (tokens " + std::to_string(s.tokens) + ", top_k " +
                            std::to_string(s.top_k) + ", experts " + std::to_string(s.experts) + ", matrix [" +
                            std::to_string(expert0.rows) + ", " + std::to_string(expert0.cols) + "])");
  const int64_t slots = s.tokens * s.top_k;
  if (slots == 0) return ok_status();
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, expert0.params);
    if (be <= 0 || be > quant::kMaxBlockElems || expert0.cols % be != 0)
      return invalid_argument("expert_gemv: row length " + std::to_string(expert0.cols) +
                              " is not a whole number of blocks of " + std::to_string(be));
    const unsigned row_blocks = static_cast<unsigned>((expert0.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    for (int64_t first = 0; first < slots; first += kMaxSlotsPerLaunch) {
      const int64_t count = slots - first < kMaxSlotsPerLaunch ? slots - first : kMaxSlotsPerLaunch;
      const dim3 grid(row_blocks, static_cast<unsigned>(count));
      expert_gemv_kernel<T><<<grid, kWarpsPerBlock * 32, 0, stream>>>(expert0, per_expert, s.experts, ids, first,
                                                                       s.top_k, s.shared_input, x, y);
      QRT_TRY(cuda_launch_status("expert_gemv_kernel"));
    }
    return ok_status();
  });
}

}  // namespace qrt::kernels
