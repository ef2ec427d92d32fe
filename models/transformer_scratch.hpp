// The scratch buffers of a forward pass (Transformer::ensure_scratch_buffers sizes them per token), shared by the
// Transformer's translation units.
#pragma once

namespace qrt::transformer_scratch {

// Scratch buffers of a Sequence, each with room for `rows` tokens of `per_token` elements.
enum Scratch : int {
  kX,            // residual stream [n, hidden]
  kH,            // normed input of a sublayer [n, hidden]
  kQ,            // [n, heads * hd]
  kK,            // [n, kv_heads * hd]
  kV,            // [n, kv_heads * hd]
  kAttn,         // attention output [n, heads * hd]
  kProj,         // output of o / down / expert combine [n, hidden]
  kGate,         // [n, ffn] or [n * top_k, expert_ffn]
  kUp,           // same as kGate
  kExpertOut,    // [n * top_k, hidden]
  kRouter,       // router logits [n, experts]
  kExpertIds,    // int32 [n, top_k]
  kExpertW,      // [n, top_k]
  kStep,         // int32: token ids [n], positions [n], cache slots [n], a key count per sequence, the rows whose
                 // logits are wanted (5 per token for room)
  kLogits,       // [n, vocab]
  kHeadIds,      // int32 [n, heads]: 0, 1, .., heads - 1 in every row (latent attention's per-head projections)
  kScratchCount,
};

}  // namespace qrt::transformer_scratch
