// The safetensors container (spec/uqff.md §2.1): u64 little-endian header length N, N bytes of JSON, then the
// data buffer. Used for UQFF shards, HF checkpoints and anything else stored as safetensors.
//
// The parser checks every number in the header against the bytes that exist: header length against the file
// and a cap, dtypes against the known scalar types, shape × dtype size against each entry's byte range, ranges
// inside the data buffer and not overlapping. Gaps between entries and bytes after the last one are accepted
// (the reference Rust crate refuses them; nothing qrt reads depends on that).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quant/scalar_type.hpp"
#include "loader/mapped_file.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt {

// Header lengths above this are refused before any JSON is read (the reference implementation's cap).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
// JSON nesting deeper than this is refused (a valid header nests 3 deep).
constexpr int kSafetensorsMaxJsonDepth = 64;

struct SafetensorsEntry {
  std::string name;
  quant::ScalarType dtype = quant::ScalarType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first; [] is a scalar (one element)
  uint64_t begin = 0;          // data_offsets, relative to the data buffer
  uint64_t end = 0;
  ByteSpan data;               // the entry's bytes inside the parsed buffer

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct SafetensorsFile {
  std::string path;                              // for messages
  std::vector<SafetensorsEntry> entries;         // sorted by name
  std::map<std::string, std::string> metadata;   // "__metadata__"
  uint64_t header_bytes = 0;                     // N
  uint64_t data_offset = 0;                      // 8 + N: where the data buffer starts in the file
  std::shared_ptr<const MappedFile> mapping;     // set by read_safetensors; keeps `data` spans valid

  // The entry called `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
  // The same as an error naming the file when absent.
  Result<const SafetensorsEntry*> get(std::string_view name) const;
};

// Parses safetensors bytes (a mapping or any buffer that outlives the result). `path` only names the source
// in errors. Spans in the result point into `bytes`.
Result<SafetensorsFile> parse_safetensors(ByteSpan bytes, const std::string& path);

// Maps and parses a file; the result owns the mapping.
Result<SafetensorsFile> read_safetensors(const std::string& path);

// A dense (F32/F16/BF16) entry as a QuantTensor spanning the same bytes; other dtypes are unsupported.
Result<QuantTensor> dense_quant_tensor(const SafetensorsEntry& entry, const std::string& path);

}  // namespace qrt
