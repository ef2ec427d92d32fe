#include "models/mla_weights.hpp"

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "models/tensor_names.hpp"
#include "models/tensor_values.hpp"

namespace qrt {
namespace {

using names::LayerTensor;

Result<SlicedTensor> stack_tensor(const std::string& name, std::vector<float> values, std::vector<int64_t> shape,
                                  quant::FormatId format) {
  SlicedTensor out;
  out.tensor.name = name;
  out.tensor.shape = std::move(shape);
  out.tensor.format = format;
  if (format == quant::FormatId::kF32) {
    out.storage.resize(values.size() * sizeof(float));
    std::memcpy(out.storage.data(), values.data(), out.storage.size());
  } else {
    QRT_ASSIGN_OR_RETURN(quant::QuantBuffers b, cpu::quantize(format, values.data(), out.tensor.rows(),
                                                              out.tensor.cols(), out.tensor.params));
    out.storage = std::move(b.data);
  }
  out.tensor.data = {out.storage.data(), out.storage.size()};
  return out;
}

}  // namespace

std::string mla_latent_name(int layer) { return names::layer_tensor(layer, LayerTensor::kAttnKvAMqa) + ".latent"; }
std::string mla_rope_key_name(int layer) {
  return names::layer_tensor(layer, LayerTensor::kAttnKvAMqa) + ".rope_key";
}

Result<MlaStacks> build_mla_stacks(const TensorTable& tensors, int layer, const ModelConfig& c, int first_head,
                                   int heads, std::vector<std::string>* consumed) {
  const int64_t nope = c.qk_nope_dim, rope = c.qk_rope_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
  const int64_t all = c.heads, width = rope + lora;
  const std::string kv_b = names::layer_tensor(layer, LayerTensor::kAttnKvB);
  const std::string k_b = names::layer_tensor(layer, LayerTensor::kAttnKB);
  const std::string v_b = names::layer_tensor(layer, LayerTensor::kAttnVB);
  // key(h, d, j): K_h[d][j]; value(h, i, j): V_h[i][j] (d < nope, i < v, j < kv_lora).
  std::vector<float> k_values, v_values;
  quant::FormatId source = quant::FormatId::kF32;
  std::function<float(int64_t, int64_t, int64_t)> key, value;
  if (tensors.count(kv_b)) {
    QRT_ASSIGN_OR_RETURN(k_values, tensor_values(tensors, kv_b, {all * (nope + v), lora}));
    consumed->push_back(kv_b);
    source = tensors.at(kv_b).format;
    key = [&](int64_t h, int64_t d, int64_t j) {
      return k_values[static_cast<size_t>((h * (nope + v) + d) * lora + j)];
    };
    value = [&](int64_t h, int64_t i, int64_t j) {
      return k_values[static_cast<size_t>((h * (nope + v) + nope + i) * lora + j)];
    };
  } else if (tensors.count(k_b) || tensors.count(v_b)) {
    QRT_ASSIGN_OR_RETURN(k_values, tensor_values(tensors, k_b, {all, lora, nope}));
    QRT_ASSIGN_OR_RETURN(v_values, tensor_values(tensors, v_b, {all, v, lora}));
    consumed->push_back(k_b);
    consumed->push_back(v_b);
    source = tensors.at(k_b).format == tensors.at(v_b).format ? tensors.at(k_b).format : quant::FormatId::kF32;
    key = [&](int64_t h, int64_t d, int64_t j) { return k_values[static_cast<size_t>((h * lora + j) * nope + d)]; };
    value = [&](int64_t h, int64_t i, int64_t j) { return v_values[static_cast<size_t>((h * v + i) * lora + j)]; };
  } else {
    return not_found("tensor " + kv_b + " [" + std::to_string(all * (nope + v)) + ", " + std::to_string(lora) +
                     "] (or " + k_b + " and " + v_b + ") is missing");
  }
  const bool exact = source == quant::FormatId::kF32 || source == quant::FormatId::kF16 ||
                     source == quant::FormatId::kBF16;
  const quant::FormatId format = exact ? source : quant::FormatId::kF32;

  std::vector<float> absorb(static_cast<size_t>(heads * width * (nope + rope)), 0.0f);
  std::vector<float> expand(static_cast<size_t>(heads * v * width), 0.0f);
  for (int64_t local = 0; local < heads; ++local) {
    const int64_t h = first_head + local;
    float* a = absorb.data() + local * width * (nope + rope);
    for (int64_t r = 0; r < rope; ++r) a[r * (nope + rope) + nope + r] = 1.0f;  // the RoPE part passes through
    for (int64_t j = 0; j < lora; ++j)
      for (int64_t d = 0; d < nope; ++d) a[(rope + j) * (nope + rope) + d] = key(h, d, j);
    float* e = expand.data() + local * v * width;
    for (int64_t i = 0; i < v; ++i)
      for (int64_t j = 0; j < lora; ++j) e[i * width + rope + j] = value(h, i, j);
  }
  const std::string what = "blk." + std::to_string(layer) + " latent attention ";
  MlaStacks out;
  QRT_ASSIGN_OR_RETURN(out.q_absorb, stack_tensor(what + "query absorption (from " + kv_b + ")", std::move(absorb),
                                                  {heads, width, nope + rope}, format));
  QRT_ASSIGN_OR_RETURN(out.v_expand, stack_tensor(what + "value expansion (from " + kv_b + ")", std::move(expand),
                                                  {heads, v, width}, format));
  return out;
}

}  // namespace qrt
