// One fuzz input through the tokenizer parsers and encoders. The first byte picks the target, the rest is
// its input. Anything may come back as an error; nothing may crash, hang or allocate without bound, and a
// byte-level tokenizer must decode what it encoded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qrt::fuzz {

void tokenizer_fuzz_one(const uint8_t* data, size_t size);

}  // namespace qrt::fuzz
