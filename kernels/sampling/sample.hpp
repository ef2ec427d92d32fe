// Sampling on the device: penalties, then greedy or top-k / softmax / top-p / min-p and a draw given by the host,
// so decode copies back one token id per row. Each row gives the id that sample_with_uniform
// (kernels/cpu/sampler.hpp) gives for the same logits, parameters and u01; see sample.cu for where the two can
// differ (rounding of exp and of the softmax sum, only ever visible at a cumulative boundary).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

struct SampleSettings {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
};

// All pointers are device memory.
struct SampleRowsArgs {
  const float* logits = nullptr;  // [rows, vocab], not modified
  int64_t rows = 0;
  int64_t vocab = 0;
  SampleSettings settings;
  const double* u01 = nullptr;              // [rows] draws in [0, 1)
  const int32_t* penalty_offsets = nullptr;  // [rows + 1] into penalty_pairs, or null: no penalties
  const int32_t* penalty_pairs = nullptr;    // [pairs, 2]: (token, count), tokens distinct per row and < vocab
  int32_t* ids = nullptr;                    // [rows]
};

// Device scratch sample_rows needs for [rows, vocab] (rows * vocab < 2^31).
Result<uint64_t> sample_rows_workspace_bytes(int64_t rows, int64_t vocab);

// Issues the sampling of every row on `stream`. `workspace` holds at least sample_rows_workspace_bytes bytes
// (256-byte aligned) and must not be in use by other work on other streams.
Status sample_rows(const SampleRowsArgs& args, void* workspace, uint64_t workspace_bytes, cudaStream_t stream);

}  // namespace qrt::kernels
