// A Hugging Face checkpoint written as a UQFF export directory (spec/uqff.md §1): per requested type one shard set
// `<stem>-<n>.uqff` holding the tracked modules (attention and MLP projections, expert stacks, lm_head), one
// residual.safetensors with every other tensor as the checkpoint stores it, config.json without any
// quantization_config, the tokenizer and template files copied, and uqff_report.json listing the outputs and
// every per-layer fallback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "loader/imatrix.hpp"
#include "loader/model_source.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

struct UqffExportOptions {
  std::vector<quant::FormatId> types;  // one shard set per type, in order
  std::string stem;                    // the shard stem of a single type; empty: the type's name ("q4k")
  // (regex, type): a tracked module whose weight name ("model.layers.0.mlp.down_proj.weight") a regex matches
  // somewhere gets that type in every output; the first matching pair wins.
  std::vector<std::pair<std::string, quant::FormatId>> overrides;
  bool promote_output = true;  // lm_head in promoted_for_output(type) unless an override names it
  int threads = 1;
  uint64_t shard_bytes = uint64_t{10} << 30;  // soft cap of tensor payload per shard (mistral.rs: 10 GiB)
  bool quiet = false;
  // Checked before anything is written: the output's estimated size against the free space (throws nothing; the
  // export fails with its error).
  std::function<Status(uint64_t bytes)> check_space;
  // llama-imatrix's importance of each matrix, found by the module's GGUF name (model.layers.0.mlp.down_proj ->
  // blk.0.ffn_down.weight); the GGML types' quantizers weigh their errors by it.
  const ImportanceMatrix* importance = nullptr;
};

struct UqffExportReport {
  struct Output {
    std::string quant;                // the type's name
    std::vector<std::string> shards;  // file names in the directory
    std::vector<std::string> fallbacks;
    uint64_t bytes = 0;
  };
  std::vector<Output> outputs;
  uint64_t residual_bytes = 0;
  uint64_t source_bytes = 0;  // of the quantized modules, as the checkpoint stores them
};

// One module of a shard set: its UQFF key ("model.layers.0.self_attn.q_proj"), its encoding and its bias, if any.
struct UqffLayer;
struct UqffModule {
  std::string key;
  const UqffLayer* layer = nullptr;
  const QuantTensor* bias = nullptr;
};
// The pieces of an export, for writers of other sources (convert-model): one shard set `<stem>-<n>.uqff` in `dir`
// (split at `shard_bytes`), residual.safetensors of dense tensors under their own names, uqff_report.json.
Result<UqffExportReport::Output> write_uqff_set(const std::string& dir, const std::string& stem,
                                                const std::string& quant, const std::vector<UqffModule>& modules,
                                                uint64_t shard_bytes,
                                                const std::function<void(uint64_t)>& on_bytes = {});
Status write_uqff_residual(const std::string& dir, const std::vector<const QuantTensor*>& residual);
Status write_uqff_report(const std::string& dir, const UqffExportReport& report);

// Writes the export into `dir` (an existing directory; the caller makes it a fresh staging directory and publishes
// it). `source` is an open Hugging Face checkpoint (SourceKind::kHfCheckpoint); its directory provides the JSON
// and tokenizer files.
Result<UqffExportReport> write_uqff_export(const ModelSource& source, const std::string& dir,
                                           const UqffExportOptions& options);

// The UQFF key of a Hugging Face weight name when it is a tracked module: {key, expert index (-1: not one expert
// of a stack)}. Per-expert weights (mlp.experts.E.gate_proj, block_sparse_moe.experts.E.w1) map to the stacked
// key mistral.rs writes (mlp.experts.gate_proj, block_sparse_moe.experts.gate_proj), as do those stacked names
// themselves. Empty key: not tracked.
std::pair<std::string, int> uqff_module_of(const std::string& hf_weight_name);

}  // namespace qrt::convert
