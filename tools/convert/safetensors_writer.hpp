// Writes safetensors files (the container of UQFF shards and residual.safetensors, spec/uqff.md §2.1): an 8-byte
// little-endian header length, the JSON header padded with spaces so that the data starts 8-byte aligned, then the
// entries' bytes back to back in the order they were added.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/quant/scalar_type.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

class SafetensorsWriter {
 public:
  // An entry whose bytes the writer owns. The byte count must be the shape's element count times the dtype's size
  // (checked by write()).
  void add(std::string name, quant::ScalarType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // An entry whose bytes the caller keeps alive until write() has returned.
  void add_view(std::string name, quant::ScalarType dtype, std::vector<int64_t> shape, ByteSpan bytes);
  // Scalars ([] shape) and small vectors, little-endian.
  void add_u8(std::string name, uint8_t v);
  void add_u32(std::string name, uint32_t v);
  void add_f32(std::string name, float v);
  void add_u32_vector(std::string name, const std::vector<int64_t>& values);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  bool empty() const { return entries_.empty(); }
  bool contains(const std::string& name) const;
  uint64_t data_bytes() const { return data_bytes_; }  // the payload so far
  // Writes the file (replacing it); an entry whose bytes do not match its shape, or a repeated name, is an
  // internal error and nothing is written. `on_bytes`, when given, hears of each entry's payload as it is written
  // (a progress display).
  Status write(const std::string& path, const std::function<void(uint64_t)>& on_bytes = {}) const;

 private:
  struct Entry {
    std::string name;
    quant::ScalarType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> owned;
    ByteSpan view;
    ByteSpan bytes() const { return owned.empty() ? view : ByteSpan{owned.data(), owned.size()}; }
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0;
};

}  // namespace qrt::convert
