// A read-only memory mapping of a whole file. Every tensor span the loader hands out points into one of these,
// so the mapping must outlive the spans: hold it through a shared_ptr (ModelSource::keep_alive).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the operating system's reason. An empty file maps to an
  // empty (null, size 0) view; directories and other non-regular files are refused.
  static Result<MappedFile> open(const std::string& path);
  // The same, owned through a shared_ptr (what ModelSource::keep_alive and the parsers' results hold).
  static Result<std::shared_ptr<const MappedFile>> open_shared(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  ByteSpan bytes() const { return {data_, size_}; }

  // Bytes [offset, offset + size) of the file, or out_of_range (naming the file) when any of it lies past the
  // end. Overflow-safe for any offset and size.
  Result<ByteSpan> span(uint64_t offset, uint64_t size) const;

 private:
  void release();

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// The same bounds check for any buffer (a sub-span of a span): bytes [offset, offset + size) of `whole`.
// `what` names the buffer in the error ("file x.gguf", "data buffer of x.safetensors").
Result<ByteSpan> sub_span(ByteSpan whole, uint64_t offset, uint64_t size, const std::string& what);

}  // namespace qrt
