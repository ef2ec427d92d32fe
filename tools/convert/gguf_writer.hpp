// Writes GGUF v3 files (spec/ggml.md §1): the header, metadata key/values of every GGUF type (arrays included),
// tensor infos and the tensor data, each tensor at a multiple of general.alignment (32 unless set). The writer of
// quantize-model's and convert-model's GGUF outputs; files it writes read back through gguf-py unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

class GgufWriter {
 public:
  // Metadata, in the order set (a key set twice keeps its first place and takes the new value).
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  // general.alignment (a power of two >= 8); also stored as metadata.
  void set_alignment(uint32_t alignment);

  // A tensor of GGML type `ggml_type`, logical shape outermost first ([out, in]; GGUF stores it innermost first);
  // `data` must stay alive until write() has returned.
  void add_tensor(const std::string& name, int ggml_type, const std::vector<int64_t>& shape, ByteSpan data);

  // Writes the file; a tensor whose bytes do not match its type and shape, a repeated tensor name or a name
  // longer than 63 bytes is an error and nothing is written.
  Status write(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> value;  // the type tag and the encoded value
  };
  struct Tensor {
    std::string name;
    int ggml_type;
    std::vector<int64_t> shape;
    ByteSpan data;
  };
  void set(const std::string& key, std::vector<uint8_t> value);
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace qrt::convert
