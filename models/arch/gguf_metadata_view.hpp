// MetadataView over the GGUF reader's metadata (loader/gguf_metadata.hpp), so that config_from_gguf reads a
// real file's keys. Integer getters accept any GGUF integer type whose value fits, like llama.cpp's loader.
#pragma once

#include "loader/gguf_metadata.hpp"
#include "models/arch/arch.hpp"

namespace qrt::arch {

class GgufMetadataView final : public MetadataView {
 public:
  // `metadata` must outlive the view.
  explicit GgufMetadataView(const GgufMetadata& metadata) : md_(metadata) {}
  bool has(std::string_view key) const override { return md_.contains(key); }
  bool is_array(std::string_view key) const override;
  Result<uint32_t> get_u32(std::string_view key) const override;
  Result<float> get_f32(std::string_view key) const override;
  Result<bool> get_bool(std::string_view key) const override { return md_.get_bool(key); }
  Result<std::string> get_string(std::string_view key) const override { return md_.get_string(key); }
  Result<std::vector<uint32_t>> get_u32_array(std::string_view key) const override;
  Result<uint64_t> get_array_length(std::string_view key) const override;

 private:
  const GgufMetadata& md_;
};

}  // namespace qrt::arch
