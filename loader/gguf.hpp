// GGUF v2/v3 reader (spec/ggml.md §1): header, metadata, tensor infos and zero-copy tensor spans, for single
// files and `-00001-of-0000N.gguf` split sets.
//
// Policy (stricter than the spec where llama.cpp is stricter, see §1.2/§1.3): every count and length is checked
// against the bytes left before anything is allocated; strings are at most 1 GiB and arrays at most 2^30
// elements; nested arrays are read up to kGgufMaxArrayDepth levels; keys are non-empty printable ASCII, unique;
// `general.alignment` is a u32 power of two >= 8; tensor names are 1..63 bytes and unique; n_dims <= 4; every
// tensor's type is a live GGML type, its row length a multiple of the block size, its offset aligned, its bytes
// inside the file and disjoint from every other tensor's. Byte-swapped (big-endian) files are detected and
// refused. Tensors whose GGML type has no qrt format are an `unsupported` error naming type and tensor (or,
// with allow_unsupported_types, listed in tensor_infos without a format and left out of `tensors`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "loader/gguf_metadata.hpp"
#include "loader/mapped_file.hpp"
#include "loader/model_source.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt {

constexpr uint64_t kGgufDefaultAlignment = 32;
constexpr uint64_t kGgufMaxStringBytes = uint64_t{1} << 30;    // llama.cpp's GGUF_MAX_STRING_LENGTH
constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 30;  // llama.cpp's GGUF_MAX_ARRAY_ELEMENTS
constexpr int kGgufMaxArrayDepth = 8;                          // arrays of arrays of ... this many levels
constexpr uint64_t kGgufMaxKeyBytes = 65535;
constexpr uint64_t kGgufMaxTensorNameBytes = 63;               // GGML_MAX_NAME (64) minus the NUL
constexpr int kGgufMaxDims = 4;

struct GgufReadOptions {
  // Keep going when a tensor's GGML type has no qrt format: the tensor stays in tensor_infos (format unset)
  // and is left out of `tensors`. Off: such a tensor is an `unsupported` error.
  bool allow_unsupported_types = false;
};

struct GgufTensorInfo {
  std::string name;
  int32_t ggml_type = 0;
  std::vector<int64_t> ne;                // as stored: innermost (contiguous) dimension first, n_dims entries
  uint64_t offset = 0;                    // relative to the data section, as stored
  uint64_t file_offset = 0;               // absolute: data_offset + offset
  uint64_t nbytes = 0;
  std::optional<quant::FormatId> format;  // unset when qrt has no format for ggml_type
};

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;                  // where the tensor data section starts
  GgufMetadata metadata;
  std::vector<GgufTensorInfo> tensor_infos;  // file order
  TensorTable tensors;                       // every tensor qrt has a format for; spans point into the bytes
  std::shared_ptr<const MappedFile> mapping; // set by read_gguf_file; keeps the spans valid
};

// Parses GGUF bytes (a mapping or any buffer that outlives the result). `path` names the source in errors.
Result<GgufFile> parse_gguf(ByteSpan bytes, const std::string& path, const GgufReadOptions& options = {});

// Maps and parses one file (no sibling lookup); the result owns the mapping.
Result<GgufFile> read_gguf_file(const std::string& path, const GgufReadOptions& options = {});

// A whole model: one file, or every shard of a split set.
struct GgufModel {
  std::string path;              // what was opened
  std::vector<GgufFile> shards;  // split.no order; one entry for an unsplit file
  TensorTable tensors;           // the union of the shards' tensors

  // The model's keys live in the first shard (later shards carry only split.*).
  const GgufMetadata& metadata() const { return shards.front().metadata; }
  // The mappings the tensors point into.
  std::vector<std::shared_ptr<const void>> keep_alive() const;
};

// Opens a GGUF model. When the file carries split.count > 1, its name must end -NNNNN-of-MMMMM.gguf and every
// sibling is opened and checked (split.no, split.count, split.tensors.count, no tensor in two shards); any shard
// may be named.
Result<GgufModel> open_gguf(const std::string& path, const GgufReadOptions& options = {});

// The loader half of a ModelSource for a GGUF model: kind, path, tensors, keep_alive and gguf_metadata.
// The tokenizer is left for models/ to build from the metadata.
ModelSource gguf_model_source(GgufModel&& model);

// "<prefix>-00002-of-00005.gguf" -> {prefix, 2, 5}; nullopt for any other name.
struct GgufSplitName {
  std::string prefix;  // the path up to "-NNNNN-of-MMMMM.gguf"
  int index = 0;       // 1-based, from the name
  int count = 0;
};
std::optional<GgufSplitName> parse_gguf_split_name(const std::string& path);
std::string gguf_split_path(const std::string& prefix, int index, int count);

}  // namespace qrt
