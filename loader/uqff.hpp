// mistral.rs UQFF 1.x export directories (spec/uqff.md): shard sets of safetensors files with self-describing
// per-layer entries, plus residual.safetensors and the JSON assets.
#pragma once

#include <string>
#include <vector>

#include "loader/model_source.hpp"
#include "loader/safetensors.hpp"
#include "qrt/status.hpp"

namespace qrt {

// The newest UQFF minor version this reader understands (1.2.0).
constexpr uint32_t kUqffReaderMajor = 1;
constexpr uint32_t kUqffReaderMinor = 2;

struct UqffShardSet {
  std::string name;                 // the set's stem: "q4k", "model-q4k", or the report's quant name
  std::vector<std::string> shards;  // paths, in index order
};

// The shard sets in a directory: `<stem>-<n>.uqff` files grouped by stem (n contiguous from 0), or the outputs
// listed in uqff_report.json when it is there.
Result<std::vector<UqffShardSet>> find_uqff_shard_sets(const std::string& dir);

// Resolves what the user named to one shard set:
//   a directory (with exactly one set, else the error lists them), a shard path (its siblings are found),
//   or <dir>/<set> where <set> is a stem ("q4k"), a shard file name ("afq4-0.uqff") or a report quant name.
Result<UqffShardSet> resolve_uqff(const std::string& path);

// True when `path` names something resolve_uqff would accept (a *.uqff file, a directory holding shards, or
// <dir>/<set> whose dir holds shards).
bool looks_like_uqff(const std::string& path);

// Parsed shards of one set, checked against the reader rules (versions, duplicates, legacy files).
struct UqffShards {
  std::vector<SafetensorsFile> files;
  uint32_t major = 0, minor = 0, patch = 0;
};
Result<UqffShards> open_uqff_shards(const std::vector<std::string>& shard_paths);
// The same rules over shards already parsed (e.g. from memory with parse_safetensors); `files` in index order.
Result<UqffShards> check_uqff_shards(std::vector<SafetensorsFile> files);

// Every quantized layer of the shards as QuantTensors named `<key>.weight`, plus `<key>.bias` dense tensors.
Result<TensorTable> uqff_tensors(const UqffShards& shards);

// The whole export as a ModelSource: shard tensors, residual.safetensors tensors, the JSON assets.
Result<ModelSource> open_uqff(const std::string& path);

}  // namespace qrt
