// A GGUF model as a UQFF export directory (convert-model): the GGML blocks copied unchanged into UQFF's GGML family
// (Q/K rows of llama-family models put back in Hugging Face's order), norms and dense embeddings into
// residual.safetensors, a config.json written from the model's config (and checked by reading it back), and a
// tokenizer.json with tokenizer_config.json made from the GGUF vocabulary (byte-level BPE, "gpt2" GGUF tokenizers).
// Types mistral.rs cannot read from UQFF (the i-quants, ternary, GGML MXFP4) are refused by tensor name.
#pragma once

#include <string>

#include "loader/model_source.hpp"
#include "qrt/status.hpp"
#include "tools/convert/uqff_export.hpp"

namespace qrt::convert {

// `stem` names the shards (and the set in uqff_report.json); `dir` is an existing, empty directory.
Result<UqffExportReport> write_uqff_from_gguf(const ModelSource& gguf, const std::string& dir, const std::string& stem);

}  // namespace qrt::convert
