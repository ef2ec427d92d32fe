// A Hugging Face checkpoint quantized into one GGUF file, named and described as llama.cpp's converter would:
// tensors under GGUF names (blk.N.attn_q.weight, ffn_gate_exps for stacked experts, ...), Q/K rows of llama-family
// models permuted for interleaved RoPE, the architecture's metadata keys from the model's config, and the
// tokenizer's (gguf_tokenizer.hpp). Phi-3 keeps its fused projections (attn_qkv, and gate_up as an ffn_up of 2 *
// feed_forward_length rows) and carries LongRoPE as the rope_factors_long / rope_factors_short tensors. Norms and
// biases stay F32; every matrix takes the GGML type asked for (the output head a promoted one, as in UQFF exports),
// falling back as mistral.rs and llama.cpp do when a row does not fit its blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "loader/imatrix.hpp"
#include "loader/model_source.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

struct GgufExportOptions {
  quant::FormatId type = quant::FormatId::kQ8_0;  // a GGML type
  // Convert instead of quantizing: every tensor keeps its encoding, its bytes copied unchanged (rows reordered for
  // the Q/K permutation); a tensor whose type has no GGUF counterpart is an error naming it. The source may then
  // be a UQFF export too.
  bool keep_types = false;
  // With keep_types: a tensor whose type has no GGUF counterpart is decoded and quantized to this GGML type (and
  // listed in the report) instead of refused.
  std::optional<quant::FormatId> requantize;
  bool promote_output = true;
  std::vector<std::pair<std::string, quant::FormatId>> overrides;  // (regex over GGUF names, GGML type)
  int threads = 1;
  bool quiet = false;
  std::function<Status(uint64_t bytes)> check_space;
  // llama-imatrix's importance of each matrix, by GGUF name; the GGML quantizers weigh their errors by it. The
  // types llama-quantize makes only with one (needs_importance) are refused without it.
  const ImportanceMatrix* importance = nullptr;
};

struct GgufExportReport {
  std::vector<std::string> fallbacks;
  std::vector<std::string> requantized;  // "name: from -> to" for each tensor GgufExportOptions::requantize made
  uint64_t bytes = 0;
};

// A GGML type for a GGUF model by name ("q4_k" or mistral.rs' "q4k", "iq4_nl", "tq2_0", ...): one qrt quantizes,
// and not one of the activation types (q8_1, q8_k) llama.cpp does not load as weights.
Result<quant::FormatId> gguf_type_from_name(std::string_view name);

Result<GgufExportReport> write_gguf_export(const ModelSource& source, const std::string& path,
                                           const GgufExportOptions& options);

}  // namespace qrt::convert
