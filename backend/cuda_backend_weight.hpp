// The CUDA backend's record of an uploaded weight, shared by its translation units (cuda_backend_cuda.cpp uploads
// weights, cuda_backend_linear_cuda.cpp multiplies with them).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda_backend.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt {

// Part offsets inside a weight's one allocation.
constexpr uint64_t kPartAlignment = 256;

inline uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// A weight on the device: its parts copied unchanged into one allocation, or decoded f32 values for 1-D tensors.
struct CudaBackend::Weight {
  quant::FormatId format = quant::FormatId::kF32;
  std::vector<int64_t> shape;
  quant::QuantParams params;
  void* allocation = nullptr;  // cudaMalloc'd, holds every part below
  uint64_t allocation_bytes = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  quant::PartSizes matrix_parts;  // part sizes of one [shape[-2], shape[-1]] matrix (one expert when stacked)
  const float* values = nullptr;  // 1-D tensors: [shape[0]] decoded f32
  const void* half = nullptr;      // set_half_weights: the matrix as fp16 [rows, cols] (`data` itself for F16)
  void* half_allocation = nullptr;  // cudaMalloc'd for `half` unless the weight is F16
  // Launch tuning's choices for this shape (tune_linear): the integer-dot GEMV's rows per block for one x row and for
  // several (0: not measured, the kernel's plan decides), and whether the tensor-core GEMM takes 2..8, 9..64 and
  // 65 or more rows.
  int dp4a_rows_one = 0, dp4a_rows_batch = 0;
  int64_t dp4a_blocks_one = 0;  // one x row: at most this many looping blocks (gemv_dp4a_rows; 0: one per row group)
  bool mma_several = false, mma_wide = false, mma_tall = false;

  int64_t cols() const { return shape.back(); }
  int64_t rows() const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
    return n;
  }
  quant::QuantView view() const {
    quant::QuantView v;
    v.data = data;
    v.scales = scales;
    v.biases = biases;
    v.rows = rows();
    v.cols = cols();
    v.params = params;
    return v;
  }
  // Expert 0's [out, in] matrix of a stacked [experts, out, in] tensor.
  quant::QuantView first_matrix_view() const {
    quant::QuantView v = view();
    v.rows = shape[shape.size() - 2];
    return v;
  }
};

}  // namespace qrt
