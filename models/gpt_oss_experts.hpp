// Hugging Face gpt-oss experts into the canonical stacks. The checkpoint keeps each layer's experts as parameters
// without a ".weight" suffix: mlp.experts.gate_up_proj with gate and up interleaved (gate in the even outputs, up
// in the odd), mlp.experts.down_proj, and their _bias companions [experts, outputs]. Dense (F32/F16/BF16) they are
// stored transposed, [experts, in, out]; as MXFP4 (the _blocks/_scales pairs openai publishes, read by
// loader/hf_checkpoint.cpp) they are [experts, out, in]. Both become blk.N.ffn_{gate,up,down}_exps [experts, out,
// in] (+ ".bias"): dense ones decoded to F32, MXFP4 ones kept in their blocks (rows are byte ranges).
#pragma once

#include <set>
#include <string>

#include "models/tensor_names.hpp"
#include "qrt/status.hpp"

namespace qrt::names {

// Adds the canonical expert tensors of every layer `source` holds in gpt-oss's form to *out (owned bytes in
// out->storage) and returns the source names it consumed. A part missing or of the wrong shape is an error naming it.
Result<std::set<std::string>> canonical_gpt_oss_experts(const TensorTable& source, CanonicalTensors* out);

}  // namespace qrt::names
