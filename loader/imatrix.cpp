#include "loader/imatrix.hpp"

#include <cmath>
#include <cstring>
#include <set>

#include "loader/gguf.hpp"
#include "loader/mapped_file.hpp"

namespace qrt {
namespace {

constexpr int64_t kMaxNameBytes = 4096;  // llama.cpp's names are at most 63 bytes; anything this long is garbage

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sums of squares divided by a count cannot be negative; NaN or infinity would poison every scale they touch.
Status check_values(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || v[i] < 0.0f)
      return format_error(path + ": importance of " + name + " at column " + std::to_string(i) + " is " +
                          std::to_string(v[i]) + " (expected a finite value >= 0)");
  return ok_status();
}

// A little-endian cursor over the legacy file's bytes; every read is bounds-checked.
class Reader {
 public:
  Reader(ByteSpan bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  bool at_end() const { return pos_ == bytes_.size; }
  uint64_t left() const { return bytes_.size - pos_; }
  Result<int32_t> i32(const std::string& what) {
    if (left() < 4) return truncated(what);
    int32_t v;
    std::memcpy(&v, bytes_.data + pos_, 4);
    pos_ += 4;
    return v;
  }
  Result<std::string> text(int64_t len, const std::string& what) {
    if (len < 0 || static_cast<uint64_t>(len) > left()) return truncated(what);
    std::string s(reinterpret_cast<const char*>(bytes_.data + pos_), static_cast<size_t>(len));
    pos_ += static_cast<uint64_t>(len);
    return s;
  }
  Result<std::vector<float>> floats(int64_t n, const std::string& what) {
    if (n < 0 || static_cast<uint64_t>(n) > left() / 4) return truncated(what);
    std::vector<float> v(static_cast<size_t>(n));
    std::memcpy(v.data(), bytes_.data + pos_, static_cast<size_t>(n) * 4);
    pos_ += static_cast<uint64_t>(n) * 4;
    return v;
  }

 private:
  Status truncated(const std::string& what) const {
    return format_error(path_ + ": truncated legacy imatrix file (reading " + what + " at byte " +
                        std::to_string(pos_) + " of " + std::to_string(bytes_.size) + ")");
  }
  ByteSpan bytes_;
  std::string path_;
  uint64_t pos_ = 0;
};

Status read_legacy(ByteSpan bytes, ImportanceMatrix* out) {
  Reader r(bytes, out->path);
  QRT_ASSIGN_OR_RETURN(const int32_t n, r.i32("the entry count"));
  if (n <= 0) return format_error(out->path + ": not an importance matrix (entry count " + std::to_string(n) + ")");
  for (int32_t i = 0; i < n; ++i) {
    const std::string entry = "entry " + std::to_string(i + 1) + " of " + std::to_string(n);
    QRT_ASSIGN_OR_RETURN(const int32_t len, r.i32(entry + "'s name length"));
    if (len <= 0 || len > kMaxNameBytes)
      return format_error(out->path + ": " + entry + " has a name of " + std::to_string(len) + " bytes");
    QRT_ASSIGN_OR_RETURN(std::string name, r.text(len, entry + "'s name"));
    QRT_ASSIGN_OR_RETURN(const int32_t ncall, r.i32(name + "'s call count"));
    QRT_ASSIGN_OR_RETURN(const int32_t nval, r.i32(name + "'s value count"));
    if (nval <= 0) return format_error(out->path + ": " + name + " has " + std::to_string(nval) + " values");
    QRT_ASSIGN_OR_RETURN(std::vector<float> v, r.floats(nval, name + "'s values"));
    if (ncall > 0)
      for (float& x : v) x /= static_cast<float>(ncall);
    QRT_TRY(check_values(out->path, name, v));
    if (!out->entries.emplace(name, std::move(v)).second)
      return format_error(out->path + ": " + name + " appears twice");
  }
  // Newer legacy files end with the chunk count and the dataset's name.
  if (!r.at_end()) {
    QRT_ASSIGN_OR_RETURN(const int32_t chunks, r.i32("the chunk count"));
    QRT_ASSIGN_OR_RETURN(const int32_t len, r.i32("the dataset name's length"));
    if (len < 0 || len > kMaxNameBytes)
      return format_error(out->path + ": a dataset name of " + std::to_string(len) + " bytes");
    QRT_ASSIGN_OR_RETURN(std::string dataset, r.text(len, "the dataset name"));
    out->chunks = chunks;
    out->datasets.push_back(std::move(dataset));
    if (!r.at_end())
      return format_error(out->path + ": " + std::to_string(r.left()) + " bytes after the legacy imatrix data");
  }
  return ok_status();
}

Result<std::vector<float>> f32_values(const GgufFile& g, const std::string& name) {
  const auto it = g.tensors.find(name);
  if (it == g.tensors.end()) return format_error(g.path + ": no tensor " + name);
  if (it->second.format != quant::FormatId::kF32)
    return format_error(g.path + ": " + name + " is " + std::string(quant::format_name(it->second.format)) +
                        " (llama-imatrix writes F32)");
  std::vector<float> v(static_cast<size_t>(it->second.numel()));
  std::memcpy(v.data(), it->second.data.data, v.size() * sizeof(float));
  return v;
}

Status read_gguf_imatrix(const std::string& path, ImportanceMatrix* out) {
  QRT_ASSIGN_OR_RETURN(GgufFile g, read_gguf_file(path));
  for (const char* key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"})
    if (!g.metadata.contains(key))
      return format_error(path + ": a GGUF file without " + std::string(key) + " (not an importance matrix)");
  QRT_ASSIGN_OR_RETURN(const std::vector<std::string>* datasets, g.metadata.get_string_array("imatrix.datasets"));
  out->datasets = *datasets;
  QRT_ASSIGN_OR_RETURN(const uint64_t chunks, g.metadata.get_uint("imatrix.chunk_count"));
  out->chunks = static_cast<int64_t>(chunks);
  const std::string sums = ".in_sum2", counts = ".counts";
  std::set<std::string> names;
  for (const auto& [name, t] : g.tensors) {
    if (ends_with(name, sums)) names.insert(name.substr(0, name.size() - sums.size()));
    if (ends_with(name, counts)) names.insert(name.substr(0, name.size() - counts.size()));
  }
  if (names.empty()) return format_error(path + ": an importance matrix without entries");
  for (const std::string& name : names) {
    if (!g.tensors.count(name + sums) || !g.tensors.count(name + counts))
      return format_error(path + ": " + name + " has " + (g.tensors.count(name + sums) ? "sums" : "counts") +
                          " but no " + (g.tensors.count(name + sums) ? "counts" : "sums"));
    QRT_ASSIGN_OR_RETURN(std::vector<float> v, f32_values(g, name + sums));
    QRT_ASSIGN_OR_RETURN(const std::vector<float> n, f32_values(g, name + counts));
    if (n.empty() || v.size() % n.size() != 0)
      return format_error(path + ": " + name + " has " + std::to_string(v.size()) + " sums for " +
                          std::to_string(n.size()) + " counts");
    const size_t cols = v.size() / n.size();
    for (size_t e = 0; e < n.size(); ++e) {
      if (!std::isfinite(n[e]) || n[e] < 0.0f)
        return format_error(path + ": " + name + " has the count " + std::to_string(n[e]));
      for (size_t c = 0; c < cols; ++c) {
        float& x = v[e * cols + c];
        x = n[e] > 0.0f ? x / n[e] : 1.0f;  // a matrix (or expert) calibration never reached: unweighted
      }
    }
    QRT_TRY(check_values(path, name, v));
    out->entries.emplace(name, std::move(v));
  }
  return ok_status();
}

}  // namespace

Result<const std::vector<float>*> ImportanceMatrix::for_tensor(const std::string& name, int64_t cols,
                                                               int64_t experts) const {
  const auto it = entries.find(name);
  if (it == entries.end()) return static_cast<const std::vector<float>*>(nullptr);
  const int64_t want = cols * experts;
  if (static_cast<int64_t>(it->second.size()) != want)
    return invalid_argument(path + ": the importance of " + name + " has " + std::to_string(it->second.size()) +
                            " values, the tensor needs " + std::to_string(want) +
                            (experts > 1 ? " (" + std::to_string(experts) + " experts of " + std::to_string(cols) +
                                               " columns)"
                                         : " (one per column)") +
                            "; was the imatrix computed for another model?");
  return &it->second;
}

Result<ImportanceMatrix> read_imatrix(const std::string& path) {
  QRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open_shared(path));
  ImportanceMatrix m;
  m.path = path;
  const ByteSpan bytes = file->bytes();
  if (bytes.size >= 4 && std::memcmp(bytes.data, "GGUF", 4) == 0) {
    m.file_format = "gguf";
    QRT_TRY(read_gguf_imatrix(path, &m));
  } else {
    m.file_format = "legacy";
    QRT_TRY(read_legacy(bytes, &m));
  }
  return m;
}

}  // namespace qrt
