#include "tools/convert/mxfp4_repack.hpp"

#include <cstddef>

namespace qrt::convert {

constexpr int64_t kBlock = 32, kBlockBytes = 17;

std::vector<uint8_t> mxfp4_uqff_to_gguf(const uint8_t* weight, const uint8_t* scales, int64_t rows, int64_t cols) {
  const int64_t blocks = rows * (cols / kBlock);
  std::vector<uint8_t> out(static_cast<size_t>(blocks * kBlockBytes));
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pairs = weight + b * (kBlock / 2);  // rows are whole blocks, so blocks are consecutive
    uint8_t* o = out.data() + b * kBlockBytes;
    o[0] = scales[b];
    auto code = [&](int k) { return static_cast<uint8_t>((pairs[k / 2] >> (4 * (k & 1))) & 0xF); };
    for (int j = 0; j < 16; ++j) o[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
  }
  return out;
}

void mxfp4_gguf_to_uqff(const uint8_t* blocks, int64_t rows, int64_t cols, std::vector<uint8_t>* weight,
                        std::vector<uint8_t>* scales) {
  const int64_t n = rows * (cols / kBlock);
  weight->assign(static_cast<size_t>(n * kBlock / 2), 0);
  scales->assign(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < n; ++b) {
    const uint8_t* in = blocks + b * kBlockBytes;
    (*scales)[static_cast<size_t>(b)] = in[0];
    uint8_t* pairs = weight->data() + b * (kBlock / 2);
    for (int k = 0; k < kBlock; ++k) {
      const uint8_t code = k < 16 ? (in[1 + k] & 0xF) : (in[1 + k - 16] >> 4);
      pairs[k / 2] = static_cast<uint8_t>(pairs[k / 2] | (code << (4 * (k & 1))));
    }
  }
}

}  // namespace qrt::convert
