#include "models/fused_tensors.hpp"

#include <string>

#include "backend/op_checks.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "models/mla_weights.hpp"
#include "models/tensor_names.hpp"
#include "qrt/log.hpp"

namespace qrt {
namespace {

using names::LayerTensor;

// Replaces `fused` (a weight or its bias) in *out by the row ranges `parts` (name, rows), in order.
Status split_rows(const QuantTensor& fused, const std::vector<std::pair<std::string, int64_t>>& parts,
                  TensorTable* out, std::vector<SlicedTensor>* keep) {
  int64_t total = 0;
  for (const auto& [name, rows] : parts) total += rows;
  if (fused.shape.empty() || fused.shape[0] != total)
    return invalid_argument("tensor " + fused.name + " " + op_checks::shape_string(fused.shape) + ": expected " +
                            std::to_string(total) + " rows to split into " + parts.front().first + " ...");
  for (const auto& [name, rows] : parts)
    if (out->count(name))
      return invalid_argument("tensor " + fused.name + " is fused, but " + name + " is present as well");
  bool row_sliceable = true;
  int64_t start = 0;
  for (const auto& [name, rows] : parts) {
    row_sliceable = row_sliceable &&
                    quant::check_slice(fused.format, fused.params, fused.shape, quant::DimRange{0, start, rows}).ok();
    start += rows;
  }
  start = 0;
  if (!row_sliceable) {
    // HQQ's groups run down the columns of the flattened tensor: no row range is a tensor of its own. The parts
    // are kept decoded instead (the same values, 4 bytes per weight).
    const int64_t cols = fused.cols();
    SlicedTensor decoded;
    decoded.storage.resize(static_cast<size_t>(fused.numel()) * sizeof(float));
    Status s = cpu::dequantize(fused.format, fused.view(), reinterpret_cast<float*>(decoded.storage.data()));
    if (!s.ok()) return s.with_context("decoding " + fused.name + " to split it");
    log_warn(fused.name, " (", quant::format_name(fused.format),
             ") cannot be split by rows; its parts are kept as F32");
    for (const auto& [name, rows] : parts) {
      QuantTensor t = fused;
      t.format = quant::FormatId::kF32;
      t.params = {};
      t.shape = {rows, cols};
      t.data = {decoded.storage.data() + start * cols * sizeof(float), static_cast<uint64_t>(rows * cols) * 4};
      t.scales = t.biases = {};
      out->emplace(name, t);
      start += rows;
    }
    keep->push_back(std::move(decoded));  // the heap buffer the spans point into moves with it
    return ok_status();
  }
  for (const auto& [name, rows] : parts) {
    QRT_ASSIGN_OR_RETURN(SlicedTensor part, slice_tensor(fused, quant::DimRange{0, start, rows}));
    out->emplace(name, part.tensor);
    if (!part.storage.empty()) keep->push_back(std::move(part));
    start += rows;
  }
  return ok_status();
}

}  // namespace

Result<TensorTable> split_fused_tensors(const TensorTable& tensors, const ModelConfig& c,
                                        std::vector<SlicedTensor>* keep) {
  TensorTable out;
  const int64_t head_dim = c.head_dim > 0 ? c.head_dim : (c.heads > 0 ? c.hidden / c.heads : 0);
  const int64_t q_dim = int64_t{c.heads} * head_dim, kv_dim = int64_t{c.kv_heads} * head_dim;
  std::vector<std::pair<const QuantTensor*, std::vector<std::pair<std::string, int64_t>>>> splits;
  for (const auto& [name, t] : tensors) {
    bool fused = false;
    for (int l = 0; l < c.layers && !fused; ++l) {
      auto n = [&](LayerTensor x) { return names::layer_tensor(l, x); };
      for (const bool bias : {false, true}) {
        auto named = [&](LayerTensor x) { return bias ? names::bias_of(n(x)) : n(x); };
        if (name == named(LayerTensor::kAttnQkv)) {
          splits.push_back({&t, {{named(LayerTensor::kAttnQ), q_dim},
                                 {named(LayerTensor::kAttnK), kv_dim},
                                 {named(LayerTensor::kAttnV), kv_dim}}});
          fused = true;
        }
        const bool gguf_fused_up = name == named(LayerTensor::kFfnUp) && c.ffn > 0 && !t.shape.empty() &&
                                   t.shape[0] == 2 * int64_t{c.ffn} && !tensors.count(named(LayerTensor::kFfnGate));
        if (!bias && c.kv_lora_rank > 0 && name == n(LayerTensor::kAttnKvAMqa)) {
          // DeepSeek's latent and shared RoPE key come from one projection: two matrices for the transformer.
          splits.push_back({&t, {{mla_latent_name(l), c.kv_lora_rank}, {mla_rope_key_name(l), c.qk_rope_dim}}});
          fused = true;
        }
        if (name == named(LayerTensor::kFfnGateUp) || gguf_fused_up) {
          splits.push_back({&t, {{named(LayerTensor::kFfnGate), c.ffn}, {named(LayerTensor::kFfnUp), c.ffn}}});
          fused = true;
        }
      }
    }
    if (!fused) out.emplace(name, t);
  }
  for (const auto& [t, parts] : splits) QRT_TRY(split_rows(*t, parts, &out, keep));
  return out;
}

}  // namespace qrt
