// libFuzzer target: the UQFF shard reader on arbitrary bytes. The input is one shard, or several shards joined by
// kShardSeparator (so the cross-shard rules of spec/uqff.md §2.4 - duplicates, version copies, a layer's entries
// split over shards - are reached too). Each shard is parsed from memory, the reader rules are applied
// (check_uqff_shards) and every layer is built (uqff_tensors). Whatever is accepted must have its spans inside the
// input with exactly the byte sizes its format needs, and small tensors are dequantized in full, so a size check
// that lets a decoder read past a part shows up under AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "loader/safetensors.hpp"
#include "loader/uqff.hpp"

namespace {

// Joins shards in one fuzz input; the seed corpus (make_corpus.py) uses the same bytes.
constexpr char kShardSeparator[] = "\n--uqff-shard--\n";
constexpr size_t kSeparatorBytes = sizeof(kShardSeparator) - 1;
constexpr size_t kMaxShards = 4;
// Tensors up to this many elements are dequantized (keeps each run fast).
constexpr int64_t kMaxDecodedElements = 1 << 16;

std::vector<qrt::ByteSpan> split_shards(const uint8_t* data, size_t size) {
  std::vector<qrt::ByteSpan> shards;
  size_t begin = 0;
  for (size_t i = 0; i + kSeparatorBytes <= size && shards.size() + 1 < kMaxShards; ++i) {
    if (std::memcmp(data + i, kShardSeparator, kSeparatorBytes) != 0) continue;
    shards.push_back(qrt::ByteSpan{data + begin, i - begin});
    begin = i + kSeparatorBytes;
    i = begin - 1;
  }
  shards.push_back(qrt::ByteSpan{data + begin, size - begin});
  return shards;
}

void check_inside(const qrt::ByteSpan& span, const uint8_t* data, size_t size) {
  if (span.size == 0) return;
  if (span.data < data || span.size > size || span.data + span.size > data + size) __builtin_trap();
  volatile uint8_t first = span.data[0], last = span.data[span.size - 1];
  (void)first;
  (void)last;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<qrt::SafetensorsFile> files;
  for (const qrt::ByteSpan& shard : split_shards(data, size)) {
    auto f = qrt::parse_safetensors(shard, "fuzz-" + std::to_string(files.size()) + ".uqff");
    if (!f.ok()) {
      if (f.status().message().empty()) __builtin_trap();  // every refusal must say why
      return 0;
    }
    files.push_back(std::move(*f));
  }
  auto shards = qrt::check_uqff_shards(std::move(files));
  if (!shards.ok()) {
    if (shards.status().message().empty()) __builtin_trap();
    return 0;
  }
  if (shards->major != qrt::kUqffReaderMajor || shards->minor > qrt::kUqffReaderMinor) __builtin_trap();
  auto table = qrt::uqff_tensors(*shards);
  if (!table.ok()) {
    if (table.status().message().empty()) __builtin_trap();
    return 0;
  }
  std::vector<float> out;
  for (const auto& [name, t] : *table) {
    if (name != t.name) __builtin_trap();
    check_inside(t.data, data, size);
    check_inside(t.scales, data, size);
    check_inside(t.biases, data, size);
    int64_t numel = 1;  // a scalar (shape []) is one element
    for (int64_t d : t.shape)
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) __builtin_trap();
    if (numel == 0) {  // an empty dense tensor (a safetensors shape with a 0) holds no bytes
      if (t.bytes() != 0) __builtin_trap();
      continue;
    }
    // The spans must be exactly what the format needs for the logical shape.
    auto sizes = qrt::cpu::part_sizes(t.format, t.rows(), t.cols(), t.params);
    if (!sizes.ok()) __builtin_trap();
    if (sizes->data != t.data.size || sizes->scales != t.scales.size || sizes->biases != t.biases.size)
      __builtin_trap();
    if (numel > kMaxDecodedElements) continue;
    out.assign(static_cast<size_t>(numel), 0.0f);
    // A refusal here (a row the format's blocks cannot tile) is fine; a read outside a part is not.
    (void)qrt::cpu::dequantize(t.format, t.view(), out.data());
  }
  return 0;
}
