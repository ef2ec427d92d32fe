// Fused projections (Phi-3's qkv_proj and gate_up_proj) split into the canonical tensors the transformer loads.
// Rows of a matrix are contiguous in every row-sliceable format, so the parts point into the fused tensor's bytes
// (loader/tensor_slice.hpp), and tensor parallelism then slices each part as it would an unfused model's.
#pragma once

#include <vector>

#include "loader/quant_tensor.hpp"
#include "loader/tensor_slice.hpp"
#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt {

// `tensors` with blk.N.attn_qkv replaced by attn_q, attn_k and attn_v (q_dim, kv_dim and kv_dim rows), and
// blk.N.ffn_gate_up — or a GGUF ffn_up of 2 * ffn rows next to no ffn_gate — by ffn_gate and ffn_up (the halves,
// gate first); biases alike. A fused tensor of the wrong shape, or next to one of its parts, is an error naming it.
// Slices that had to be gathered (none for row ranges) keep their bytes in *keep, which must outlive the table; a
// format that cannot slice rows (HQQ) gives its parts decoded to F32 there, with a warning.
Result<TensorTable> split_fused_tensors(const TensorTable& tensors, const ModelConfig& config,
                                        std::vector<SlicedTensor>* keep);

}  // namespace qrt
