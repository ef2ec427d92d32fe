#include "models/arch/gguf_metadata_view.hpp"

namespace qrt::arch {

bool GgufMetadataView::is_array(std::string_view key) const {
  const GgufValue* v = md_.find(key);
  return v != nullptr && v->type() == GgufType::kArray;
}

Result<uint32_t> GgufMetadataView::get_u32(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(uint64_t v, md_.get_uint(key));
  if (v > 0xFFFFFFFFull)
    return out_of_range("GGUF metadata " + md_.source() + ": " + std::string(key) + " = " + std::to_string(v) +
                        " does not fit 32 bits");
  return static_cast<uint32_t>(v);
}

Result<float> GgufMetadataView::get_f32(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(double v, md_.get_float(key));
  return static_cast<float>(v);
}

Result<std::vector<uint32_t>> GgufMetadataView::get_u32_array(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(std::vector<int64_t> values, md_.get_int_array(key));
  std::vector<uint32_t> out;
  out.reserve(values.size());
  for (int64_t v : values) {
    if (v < 0 || v > 0xFFFFFFFFll)
      return out_of_range("GGUF metadata " + md_.source() + ": " + std::string(key) + " holds " + std::to_string(v) +
                          ", not a u32");
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

Result<uint64_t> GgufMetadataView::get_array_length(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufArray* a, md_.get_array(key));
  return static_cast<uint64_t>(a->size());
}

}  // namespace qrt::arch
