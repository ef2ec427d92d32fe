// The experts' staged GEMV (expert_gemv_staged.cuh): checks, the format's family, and the launches.
#include <climits>
#include <string>

#include "kernels/moe/expert_gemv.hpp"
#include "kernels/moe/expert_gemv_staged.cuh"

namespace qrt::kernels {
namespace {

constexpr int64_t kMaxSlotsPerLaunch = 65535;  // grid.y limit

Status run_family(quant::FormatId format, const staged_experts::Launch& l) {
  for (auto family : {staged_experts::afq_launch, staged_experts::float_launch}) {
    if (std::optional<Status> status = family(format, l)) return *status;
  }
  return invalid_argument(std::string(l.name) + ": no policy");  // unreachable: the callers checked applies
}

Status check(const std::string& name, quant::FormatId format, const quant::QuantView& expert0,
             const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s, const float* x,
             const float* y) {
  if (s.tokens < 0 || s.top_k <= 0 || s.experts <= 0)
    return invalid_argument(name + ": bad shape (tokens " + std::to_string(s.tokens) + ", top_k " +
                            std::to_string(s.top_k) + ", experts " + std::to_string(s.experts) + ")");
  if (!expert_gemv_staged_applies(format, expert0, per_expert, x))
    return invalid_argument(name + ": no staged kernel for experts of [" + std::to_string(expert0.rows) + ", " +
                            std::to_string(expert0.cols) + "] at this alignment (check expert_gemv_staged_applies)");
  if (ids == nullptr || y == nullptr) return invalid_argument(name + ": null ids or output");
  if (s.tokens * s.top_k > INT32_MAX) return unsupported(name + ": more than 2^31 slots");
  return ok_status();
}

}  // namespace

bool expert_gemv_staged_applies(quant::FormatId format, const quant::QuantView& expert0,
                                const quant::PartSizes& per_expert, const float* x) {
  if (expert0.rows <= 0 || expert0.rows >= INT_MAX || expert0.data == nullptr) return false;
  for (auto family : {staged_experts::afq_applies, staged_experts::float_applies}) {
    if (std::optional<bool> applies = family(format, expert0, per_expert, x)) return *applies;
  }
  return false;
}

Status expert_gemv_staged(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                          const int32_t* ids, const ExpertGemvShape& s, const float* x, float* y,
                          cudaStream_t stream) {
  const std::string name = "expert_gemv_staged " + std::string(quant::format_name(format));
  QRT_TRY(check(name, format, expert0, per_expert, ids, s, x, y));
  const int64_t slots = s.tokens * s.top_k;
  for (int64_t first = 0; first < slots; first += kMaxSlotsPerLaunch) {
    const int64_t count = std::min(slots - first, kMaxSlotsPerLaunch);
    const staged_experts::Experts e{ids,           first,           s.top_k,           s.experts,
                                    s.shared_input, per_expert.data, per_expert.scales, per_expert.biases};
    QRT_TRY(run_family(format, {name.c_str(), expert0, e, count, count, x, y, stream}));
  }
  return ok_status();
}

Status expert_gemv_staged_grouped(quant::FormatId format, const quant::QuantView& expert0,
                                  const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s,
                                  const float* x, float* y, void* workspace, cudaStream_t stream) {
  const std::string name = "expert_gemv_staged_grouped " + std::string(quant::format_name(format));
  QRT_TRY(check(name, format, expert0, per_expert, ids, s, x, y));
  if (s.tokens == 0) return ok_status();
  ExpertSlotLists lists;
  QRT_TRY(group_expert_slots(ids, s, expert0.rows, y, workspace, stream, &lists).with_context(name));
  const staged_experts::Experts e{.ids = ids,
                                  .first_slot = 0,
                                  .top_k = s.top_k,
                                  .experts = s.experts,
                                  .shared_input = s.shared_input,
                                  .data_stride = per_expert.data,
                                  .scales_stride = per_expert.scales,
                                  .biases_stride = per_expert.biases,
                                  .offsets = lists.offsets,
                                  .order = lists.order};
  const int64_t busy = std::min<int64_t>(s.experts, s.tokens * s.top_k);
  return run_family(format, {name.c_str(), expert0, e, s.experts, busy, x, y, stream});
}

}  // namespace qrt::kernels
