// The mixture-of-experts MLP of a layer: the router (plain top-k, or DeepSeek's grouped and scaled routing), the
// selected experts (with gpt-oss's biases), their weighted sum, and DeepSeek's shared experts beside them.
#include "models/transformer.hpp"
#include "models/transformer_layer.hpp"
#include "models/transformer_scratch.hpp"

namespace qrt {

using namespace transformer_scratch;  // NOLINT: the scratch names read as the buffers they are

Status Transformer::moe_mlp(std::vector<ScopedBuffer>& scratch, int layer_index, int64_t n, F32View proj) {
  const ModelConfig& c = config_;
  const Layer& L = layers_[static_cast<size_t>(layer_index)];
  Backend& be = backend_;
  auto f32 = [&](int which_buffer, int64_t rows, int64_t cols) {
    return scratch[static_cast<size_t>(which_buffer)].view<float>(rows, cols);
  };
  const int64_t hidden = c.hidden, top_k = c.experts_used;
  const F32View h = f32(kH, n, hidden);
  const F32View router = f32(kRouter, n, c.experts), weights = f32(kExpertW, n, top_k);
  const I32View ids = scratch[kExpertIds].view<int32_t>(n, top_k);
  QRT_TRY(be.linear(h, L.router, L.router_bias, router));
  if (c.router_sigmoid || c.expert_choice_bias || c.expert_groups > 1 || c.routed_scale != 1.0f) {
    MoeRouting routing;
    routing.sigmoid = c.router_sigmoid;
    routing.choice_bias = static_cast<const float*>(L.choice_bias.buffer().ptr);
    routing.groups = c.expert_groups;
    routing.groups_used = c.expert_groups_used;
    routing.group_top2 = c.group_score_top2;
    routing.renormalize = c.normalize_topk;
    routing.scale = c.routed_scale;
    QRT_TRY(be.moe_route_grouped(router, routing, ids, weights));
  } else {
    QRT_TRY(be.moe_route(router, c.normalize_topk, ids, weights));
  }
  const F32View gate = f32(kGate, n * top_k, L.expert_ffn), up = f32(kUp, n * top_k, L.expert_ffn);
  const F32View expert_out = f32(kExpertOut, n * top_k, hidden);
  const Backend::ExpertPart gate_up_exps[] = {{L.gate_exps, gate}, {L.up_exps, up}};
  QRT_TRY(be.linear_experts_same_input(h, gate_up_exps, ids));
  const auto bias_table = [&](const ScopedBuffer& b, int64_t width) { return b.view<const float>(c.experts, width); };
  if (c.expert_bias) {
    QRT_TRY(be.add_indexed_rows(gate, bias_table(L.gate_exps_bias, L.expert_ffn), ids));
    QRT_TRY(be.add_indexed_rows(up, bias_table(L.up_exps_bias, L.expert_ffn), ids));
  }
  QRT_TRY(gated_activation(gate, up));
  QRT_TRY(be.linear_experts(gate, L.down_exps, ids, expert_out));
  if (L.down_exps_bias.buffer().ptr != nullptr)
    QRT_TRY(be.add_indexed_rows(expert_out, bias_table(L.down_exps_bias, hidden), ids));
  QRT_TRY(be.moe_combine(expert_out, weights, proj));
  if (!L.gate_shexp.valid()) return ok_status();
  // Shared experts: a dense MLP on every token. A partial sum (their slice on each rank) joins the routed one, which
  // run_layer all-reduces unless the experts are replicated; then it is all-reduced alone first. Whole shared
  // experts join a split routed sum on rank 0 only (the other ranks skip them), a whole one directly.
  if (L.shared_replicated && !L.experts_replicated && be.tp_rank() != 0) return ok_status();
  const F32View shared_gate = f32(kGate, n, L.shared_ffn), shared_up = f32(kUp, n, L.shared_ffn);
  const F32View shared_out = f32(kExpertOut, n, hidden);
  const Backend::LinearPart gate_up[] = {{L.gate_shexp, {}, shared_gate}, {L.up_shexp, {}, shared_up}};
  QRT_TRY(be.linear_same_input(h, gate_up));
  QRT_TRY(gated_activation(shared_gate, shared_up));
  QRT_TRY(be.linear(shared_gate, L.down_shexp, {}, shared_out));
  if (L.experts_replicated && !L.shared_replicated) QRT_TRY(be.all_reduce_sum(shared_out));
  return be.add(proj, shared_out, proj);
}

}  // namespace qrt
