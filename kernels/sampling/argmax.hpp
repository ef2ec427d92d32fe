// Greedy sampling on the device: the index of each row's largest logit, so decode copies back 4 bytes per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// ids[r] = argmax of logits[r, :]; among equal maxima the lowest index wins (as std::max_element); NaN never wins
// (a row of NaN gives 0).  logits: [rows, cols]; ids: [rows] int32 (device pointers).
Status argmax_rows(const float* logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream);

}  // namespace qrt::kernels
