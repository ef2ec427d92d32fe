// A small tensor's values decoded on the host (norm and bias vectors the transformer reads, the latent attention's
// kv_b it refolds), after checking its part sizes against its format and shape.
#pragma once

#include <string>
#include <vector>

#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt {

Result<std::vector<float>> tensor_values(const QuantTensor& t);

// Tensor `name` of `tensors`, which must have `shape`; the errors name both.
Result<std::vector<float>> tensor_values(const TensorTable& tensors, const std::string& name,
                                         const std::vector<int64_t>& shape);

}  // namespace qrt
