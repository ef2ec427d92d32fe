// The expert projections on the integer-dot GEMV's kernels (expert_gemv.hpp): one token's slots each on their own
// (expert_gemv_dp4a), or a batch's slots grouped by expert (expert_gemv_dp4a_grouped). The per-format policies and
// the row loop are gemv_dp4a's (kernels/linear/gemv_dp4a_launch.cuh); the experts are read from `ids` on the device,
// so a captured decode graph serves whatever the router picks.
#include <algorithm>
#include <climits>
#include <string>

#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/moe/expert_gemv.hpp"

namespace qrt::kernels {
bool expert_gemv_dp4a_applies(quant::FormatId format, const quant::QuantView& expert0,
                              const quant::PartSizes& per_expert) {
  if (!gemv_dp4a_applies(format, expert0)) return false;
  // Expert e's parts must sit as aligned as expert 0's: 16 bytes for the packed codes, the scale dtype for AFQ's
  // group scales and biases.
  if (per_expert.data % 16 != 0) return false;
  if (expert0.scales != nullptr && !quant::is_e2m1_stream(format)) {  // MXFP4's and NVFP4's scale bytes: any address
    const uint64_t align = static_cast<uint64_t>(quant::float_scale_bytes(expert0.params.scale_type));
    if (align == 0 || per_expert.scales % align != 0 || per_expert.biases % align != 0) return false;
  }
  return true;
}

namespace {

constexpr int64_t kMaxSlotsPerLaunch = 65535;  // grid.y limit

// The family entry point that has the format's policy runs the launch.
Status launch_family(quant::FormatId format, const dp4a_launch::Dp4aLaunch& launch, const std::string& name) {
  for (auto family : {dp4a_launch::launch_ggml, dp4a_launch::launch_iq_grids, dp4a_launch::launch_tables_and_afq}) {
    if (std::optional<Status> status = family(format, launch)) return *status;
  }
  return invalid_argument(name + ": no policy");  // unreachable: gemv_dp4a_applies checked
}

Status check_experts(const std::string& name, quant::FormatId format, const quant::QuantView& expert0,
                     const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s,
                     Q8ConstActivations x, float* y) {
  if (s.tokens < 0 || s.top_k <= 0 || s.experts <= 0)
    return invalid_argument(name + ": bad shape (tokens " + std::to_string(s.tokens) + ", top_k " +
                            std::to_string(s.top_k) + ", experts " + std::to_string(s.experts) + ")");
  if (!expert_gemv_dp4a_applies(format, expert0, per_expert))
    return invalid_argument(name + ": no integer-dot kernel for experts of [" + std::to_string(expert0.rows) + ", " +
                            std::to_string(expert0.cols) + "] at this alignment (check expert_gemv_dp4a_applies)");
  if (ids == nullptr || y == nullptr || x.codes == nullptr || x.scales == nullptr)
    return invalid_argument(name + ": null ids, activations or output");
  if (expert0.rows > INT_MAX) return invalid_argument(name + ": more rows than one grid holds");
  return ok_status();
}

}  // namespace

Status expert_gemv_dp4a(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                        const int32_t* ids, const ExpertGemvShape& s, Q8ConstActivations x, float* y,
                        cudaStream_t stream) {
  const GemvPart stack{expert0, y};
  return expert_gemv_dp4a_stacks(format, {&stack, 1}, per_expert, ids, s, x, stream);
}

Status expert_gemv_dp4a_stacks(quant::FormatId format, std::span<const GemvPart> stacks,
                               const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s,
                               Q8ConstActivations x, cudaStream_t stream) {
  const std::string name = "expert_gemv_dp4a " + std::string(quant::format_name(format));
  if (stacks.empty() || stacks.size() > static_cast<size_t>(kGemvMaxParts))
    return invalid_argument(name + ": " + std::to_string(stacks.size()) + " stacks in one launch (1.." +
                            std::to_string(kGemvMaxParts) + ")");
  const quant::QuantView& first = stacks[0].w;
  for (const GemvPart& stack : stacks) {
    QRT_TRY(check_experts(name, format, stack.w, per_expert, ids, s, x, stack.y));
    const quant::QuantView& w = stack.w;
    if (w.rows != first.rows || w.cols != first.cols || w.params.group_size != first.params.group_size ||
        w.params.scale_type != first.params.scale_type || (w.scales == nullptr) != (first.scales == nullptr) ||
        (w.biases == nullptr) != (first.biases == nullptr) || w.params.global_scale != first.params.global_scale)
      return invalid_argument(name + ": the stacks of one launch differ in shape or group parameters ([" +
                              std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] after [" +
                              std::to_string(first.rows) + ", " + std::to_string(first.cols) + "])");
  }
  const int64_t slots = s.tokens * s.top_k;
  for (int64_t slot0 = 0; slot0 < slots; slot0 += kMaxSlotsPerLaunch) {
    const dp4a_launch::Dp4aExperts experts{ids,           slot0,           s.top_k,           s.experts,
                                           s.shared_input, per_expert.data, per_expert.scales, per_expert.biases,
                                           0};  // lanes: the launch picks them from the row's items
    dp4a_launch::Dp4aLaunch launch{stacks, x, 1, stream, 0};
    launch.experts = &experts;
    launch.slots = std::min(slots - slot0, kMaxSlotsPerLaunch);
    QRT_TRY(launch_family(format, launch, name));
  }
  return ok_status();
}

Status expert_gemv_dp4a_grouped(quant::FormatId format, const quant::QuantView& expert0,
                                const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s,
                                Q8ConstActivations x, float* y, void* workspace, cudaStream_t stream) {
  const std::string name = "expert_gemv_dp4a_grouped " + std::string(quant::format_name(format));
  QRT_TRY(check_experts(name, format, expert0, per_expert, ids, s, x, y));
  if (s.tokens == 0) return ok_status();
  ExpertSlotLists lists;
  QRT_TRY(group_expert_slots(ids, s, expert0.rows, y, workspace, stream, &lists).with_context(name));
  const dp4a_launch::Dp4aExperts experts{.ids = ids,
                                         .first_slot = 0,
                                         .top_k = s.top_k,
                                         .experts = s.experts,
                                         .shared_input = s.shared_input,
                                         .data_stride = per_expert.data,
                                         .scales_stride = per_expert.scales,
                                         .biases_stride = per_expert.biases,
                                         .lanes = 0,  // the launch picks them from the row's items
                                         .offsets = lists.offsets,
                                         .order = lists.order};
  const GemvPart part{expert0, y};
  dp4a_launch::Dp4aLaunch launch{{&part, 1}, x, 1, stream, 0};
  launch.experts = &experts;
  return launch_family(format, launch, name);
}

}  // namespace qrt::kernels
