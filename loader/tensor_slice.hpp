// One rank's slice of a QuantTensor, following the format's slicing rules (kernels/quant/slicing.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant/slicing.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt {

// A slice as a QuantTensor of its own. A slice whose bytes are contiguous in every part (rows of a matrix) points
// into the original mapping, zero-copy; otherwise (columns, the middle dimension of an expert stack) the slice's
// bytes are gathered into `storage`, reading only them. Move-only: the spans may point into `storage`.
struct SlicedTensor {
  QuantTensor tensor;
  std::vector<uint8_t> storage;

  SlicedTensor() = default;
  SlicedTensor(SlicedTensor&&) = default;
  SlicedTensor& operator=(SlicedTensor&&) = default;
  SlicedTensor(const SlicedTensor&) = delete;
  SlicedTensor& operator=(const SlicedTensor&) = delete;
};

// Checks the range against the format's rules and the tensor's spans against the slice's byte ranges; errors
// name the tensor and its file.
Result<SlicedTensor> slice_tensor(const QuantTensor& tensor, const quant::DimRange& range);

}  // namespace qrt
