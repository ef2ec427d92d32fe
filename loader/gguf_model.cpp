// GGUF models: one file or a `-NNNNN-of-MMMMM.gguf` split set merged into one tensor table.
#include <cstdio>

#include "loader/gguf.hpp"

namespace qrt {
namespace {

constexpr std::string_view kSplitNoKey = "split.no";
constexpr std::string_view kSplitCountKey = "split.count";
constexpr std::string_view kSplitTensorsKey = "split.tensors.count";

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// split.count of a file: 1 when absent. Any unsigned integer type is accepted (writers use u16).
Result<uint64_t> split_count_of(const GgufFile& f) {
  if (!f.metadata.contains(kSplitCountKey)) return uint64_t{1};
  return f.metadata.get_uint(kSplitCountKey);
}

Result<uint64_t> split_no_of(const GgufFile& f) {
  if (!f.metadata.contains(kSplitNoKey)) return uint64_t{0};
  return f.metadata.get_uint(kSplitNoKey);
}

// Moves `shard`'s tensors into `merged`; a tensor in two shards is an error naming both files.
Status merge_tensors(GgufFile& shard, TensorTable* merged) {
  for (auto& [name, tensor] : shard.tensors) {
    auto it = merged->find(name);
    if (it != merged->end())
      return format_error("gguf split set: tensor '" + name + "' appears in both '" + it->second.file + "' and '" +
                          shard.path + "'");
    merged->emplace(name, std::move(tensor));
  }
  shard.tensors.clear();
  return ok_status();
}

}  // namespace

std::optional<GgufSplitName> parse_gguf_split_name(const std::string& path) {
  // "<prefix>-NNNNN-of-MMMMM.gguf": 5 digits each, as llama.cpp's gguf-split and gguf-py write them.
  constexpr std::string_view kSuffix = ".gguf";
  constexpr size_t kTail = 1 + 5 + 4 + 5 + 5;  // "-00001-of-00003.gguf"
  if (path.size() < kTail) return std::nullopt;
  const std::string_view tail = std::string_view(path).substr(path.size() - kTail);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || tail.substr(15) != kSuffix) return std::nullopt;
  const std::string_view index = tail.substr(1, 5);
  const std::string_view count = tail.substr(10, 5);
  if (!all_digits(index) || !all_digits(count)) return std::nullopt;
  GgufSplitName n;
  n.prefix = path.substr(0, path.size() - kTail);
  n.index = std::stoi(std::string(index));
  n.count = std::stoi(std::string(count));
  if (n.index < 1 || n.count < 1 || n.index > n.count) return std::nullopt;
  return n;
}

std::string gguf_split_path(const std::string& prefix, int index, int count) {
  char tail[32];
  std::snprintf(tail, sizeof(tail), "-%05d-of-%05d.gguf", index, count);
  return prefix + tail;
}

std::vector<std::shared_ptr<const void>> GgufModel::keep_alive() const {
  std::vector<std::shared_ptr<const void>> owners;
  for (const GgufFile& f : shards)
    if (f.mapping) owners.push_back(f.mapping);
  return owners;
}

Result<GgufModel> open_gguf(const std::string& path, const GgufReadOptions& options) {
  QRT_ASSIGN_OR_RETURN(GgufFile named, read_gguf_file(path, options));
  const std::string where = "gguf '" + path + "'";
  QRT_ASSIGN_OR_RETURN(uint64_t count, split_count_of(named));
  QRT_ASSIGN_OR_RETURN(uint64_t named_no, split_no_of(named));

  GgufModel model;
  model.path = path;
  if (count <= 1) {
    if (count == 0) return format_error(where + ": split.count is 0");
    if (named_no != 0) return format_error(where + ": split.no = " + std::to_string(named_no) + " but split.count is 1");
    model.shards.push_back(std::move(named));
  } else {
    const auto name = parse_gguf_split_name(path);
    if (!name)
      return format_error(where + ": the file is shard " + std::to_string(named_no + 1) + " of " +
                          std::to_string(count) +
                          " (split.no/split.count) but its name does not end in -NNNNN-of-NNNNN.gguf, so the other "
                          "shards cannot be found");
    if (static_cast<uint64_t>(name->count) != count)
      return format_error(where + ": the name says " + std::to_string(name->count) + " shards but split.count is " +
                          std::to_string(count));
    if (named_no + 1 != static_cast<uint64_t>(name->index))
      return format_error(where + ": the name says shard " + std::to_string(name->index) + " but split.no is " +
                          std::to_string(named_no) + " (0-based)");
    model.shards.resize(static_cast<size_t>(count));
    for (int i = 1; i <= name->count; ++i) {
      if (i == name->index) {
        model.shards[static_cast<size_t>(i - 1)] = std::move(named);
        continue;
      }
      const std::string sibling = gguf_split_path(name->prefix, i, name->count);
      auto shard = read_gguf_file(sibling, options);
      if (!shard.ok())
        return shard.status().with_context(where + ": opening shard " + std::to_string(i) + " of " +
                                           std::to_string(count));
      QRT_ASSIGN_OR_RETURN(uint64_t shard_count, split_count_of(*shard));
      QRT_ASSIGN_OR_RETURN(uint64_t shard_no, split_no_of(*shard));
      if (shard_count != count)
        return format_error("gguf '" + sibling + "': split.count is " + std::to_string(shard_count) + ", expected " +
                            std::to_string(count) + " as in '" + path + "'");
      if (shard_no + 1 != static_cast<uint64_t>(i))
        return format_error("gguf '" + sibling + "': split.no is " + std::to_string(shard_no) + ", expected " +
                            std::to_string(i - 1));
      model.shards[static_cast<size_t>(i - 1)] = std::move(*shard);
    }
  }

  uint64_t infos = 0;
  for (GgufFile& shard : model.shards) {
    infos += shard.tensor_infos.size();
    QRT_TRY(merge_tensors(shard, &model.tensors));
  }
  const GgufMetadata& md = model.shards.front().metadata;
  if (md.contains(kSplitTensorsKey)) {
    QRT_ASSIGN_OR_RETURN(uint64_t expected, md.get_uint(kSplitTensorsKey));
    if (expected != infos)
      return format_error(where + ": split.tensors.count is " + std::to_string(expected) + " but the " +
                          std::to_string(model.shards.size()) + " shard(s) hold " + std::to_string(infos) +
                          " tensors");
  }
  return model;
}

ModelSource gguf_model_source(GgufModel&& model) {
  ModelSource source;
  source.kind = SourceKind::kGguf;
  source.path = model.path;
  source.keep_alive = model.keep_alive();
  source.tensors = std::move(model.tensors);
  if (!model.shards.empty())
    source.gguf_metadata = std::make_shared<const GgufMetadata>(std::move(model.shards.front().metadata));
  return source;
}

}  // namespace qrt
