// libFuzzer target: the GGUF parser on arbitrary bytes. Whatever it accepts must have every tensor span inside
// the input (touched below, so AddressSanitizer sees any span that is not) and metadata that can be walked.
#include <cstddef>
#include <cstdint>

#include "loader/gguf.hpp"

namespace {

// Reads every value so that a malformed value object (a bad variant index, a dangling pointer) is caught.
size_t walk(const qrt::GgufArray& a) {
  size_t n = a.size();
  if (const auto* nested = a.as<qrt::GgufArray>())
    for (const auto& inner : *nested) n += walk(inner);
  if (const auto* strings = a.as<std::string>())
    for (const auto& s : *strings) n += s.size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (bool allow_unsupported : {true, false}) {
    qrt::GgufReadOptions options;
    options.allow_unsupported_types = allow_unsupported;
    auto f = qrt::parse_gguf(qrt::ByteSpan{data, size}, "fuzz.gguf", options);
    if (!f.ok()) {
      if (f.status().message().empty()) __builtin_trap();  // every refusal must say why
      continue;
    }
    volatile size_t sink = 0;
    for (const auto& [key, value] : f->metadata.entries()) {
      sink = sink + key.size() + value.type_description().size();
      if (const auto* a = value.as<qrt::GgufArray>()) sink = sink + walk(*a);
      (void)f->metadata.get_int(key);
      (void)f->metadata.get_int_array(key);
    }
    for (const auto& [name, t] : f->tensors) {
      if (t.data.size == 0) continue;
      if (t.data.data < data || t.data.data + t.data.size > data + size) __builtin_trap();
      sink = sink + t.data.data[0] + t.data.data[t.data.size - 1];
    }
  }
  return 0;
}
