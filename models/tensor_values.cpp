#include "models/tensor_values.hpp"

#include "kernels/cpu/quant_reference.hpp"

namespace qrt {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Result<std::vector<float>> tensor_values(const QuantTensor& t) {
  auto parts = cpu::part_sizes(t.format, t.rows(), t.cols(), t.params);
  if (!parts.ok()) return parts.status().with_context("tensor " + t.name);
  if (parts->data != t.data.size || parts->scales != t.scales.size || parts->biases != t.biases.size ||
      (t.data.size && !t.data.data))
    return format_error("tensor " + t.name + ": part sizes do not match its format and shape");
  std::vector<float> values(static_cast<size_t>(t.numel()));
  quant::QuantView view = t.view();
  view.rows = t.rows();
  QRT_TRY(cpu::dequantize(t.format, view, values.data()));
  return values;
}

Result<std::vector<float>> tensor_values(const TensorTable& tensors, const std::string& name,
                                         const std::vector<int64_t>& shape) {
  auto it = tensors.find(name);
  if (it == tensors.end()) return not_found("tensor " + name + " " + shape_string(shape) + " is missing");
  if (it->second.shape != shape)
    return invalid_argument("tensor " + name + " (" + it->second.name + "): expected shape " + shape_string(shape) +
                            ", found " + shape_string(it->second.shape));
  return tensor_values(it->second);
}

}  // namespace qrt
