// A GGUF model as a UQFF export directory (convert-model): the GGML blocks copied unchanged into UQFF's GGML family
// (Q/K rows of llama-family models put back in Hugging Face's order; Phi-3's fused attn_qkv and ffn_up of 2 * ffn
// rows as the qkv_proj and gate_up_proj modules), norms and dense embeddings into residual.safetensors, a
// config.json written from the model's config (LongRoPE's factor tensors into its rope_scaling; checked by reading
// it back), and a tokenizer.json with tokenizer_config.json made from the GGUF vocabulary (byte-level BPE, "gpt2"
// GGUF tokenizers).
// GGML MXFP4 blocks become UQFF's MXFP4 layers (repacked, lossless); types mistral.rs cannot read from UQFF (the
// i-quants, ternary) are refused by tensor name unless UqffFromGgufOptions::requantize names a type for them.
#pragma once

#include <optional>
#include <string>

#include "kernels/quant/format_list.hpp"
#include "loader/model_source.hpp"
#include "qrt/status.hpp"
#include "tools/convert/uqff_export.hpp"

namespace qrt::convert {

struct UqffFromGgufOptions {
  // A tensor in a GGML type UQFF cannot hold (the i-quants, ternary types) is decoded and quantized to this UQFF
  // GGML type (listed among the report's fallbacks) instead of refused.
  std::optional<quant::FormatId> requantize;
  // llama-imatrix's importance by GGUF tensor name, for the requantized tensors.
  const ImportanceMatrix* importance = nullptr;
  bool quiet = false;  // no progress display while the shards are written
};

// `stem` names the shards (and the set in uqff_report.json); `dir` is an existing, empty directory.
Result<UqffExportReport> write_uqff_from_gguf(const ModelSource& gguf, const std::string& dir, const std::string& stem,
                                              const UqffFromGgufOptions& options = {});

// Whether UQFF's GGML family (what mistral.rs reads) has GGML type `code`.
bool uqff_ggml_code(int code);

}  // namespace qrt::convert
