// libFuzzer target: the safetensors parser on arbitrary bytes. Accepted entries must lie inside the input.
#include <cstddef>
#include <cstdint>

#include "loader/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = qrt::parse_safetensors(qrt::ByteSpan{data, size}, "fuzz.safetensors");
  if (!f.ok()) {
    if (f.status().message().empty()) __builtin_trap();  // every refusal must say why
    return 0;
  }
  volatile size_t sink = 0;
  for (const auto& e : f->entries) {
    if (e.data.size == 0) continue;
    if (e.data.data < data || e.data.data + e.data.size > data + size) __builtin_trap();
    sink = sink + e.data.data[0] + e.data.data[e.data.size - 1];
    (void)qrt::dense_quant_tensor(e, f->path);
  }
  for (const auto& [k, v] : f->metadata) sink = sink + k.size() + v.size();
  return 0;
}
