// Greedy sampling on the device: the index of each row's largest logit, so decode copies back 4 bytes per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// ids[r] = argmax of logits[r, :]; among equal maxima the lowest index wins (as std::max_element); NaN never wins
// (a row of NaN gives 0).  logits: [rows, cols]; ids: [rows] int32 (device pointers).
Status argmax_rows(const float* logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream);

// The same result over a few rows (decode) in two kernels: every row split into up to kArgmaxMaxChunks slices, a
// block each, then one block per row over the slices' winners. One block reading a 128k-entry row is bound by one
// SM's share of the bandwidth (34 µs of an H100); 64 blocks read it in a few. `workspace` holds
// argmax_split_workspace_bytes(rows) bytes of device memory. With nan_in_slot_0_wins, a row whose entry 0 is NaN
// gives 0, as std::max_element does (NaN compares false both ways, so the first entry is never displaced): the
// greedy sampler's rule, applied in the second kernel.
constexpr int kArgmaxMaxChunks = 64;
uint64_t argmax_split_workspace_bytes(int64_t rows);
Status argmax_rows_split(const float* logits, int64_t rows, int64_t cols, int32_t* ids, void* workspace,
                         cudaStream_t stream, bool nan_in_slot_0_wins = false);

}  // namespace qrt::kernels
