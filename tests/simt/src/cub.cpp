// cub::DeviceRadixSort on the CPU for the SIMT layer: a stable sort by the key bits [begin_bit, end_bit), as an op of
// the caller's stream. The workspace protocol is kept (first call sizes, second call must pass at least that much)
// so that the caller's sizing is tested too.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "internal.hpp"

namespace qrt::simt::detail {
namespace {

uint64_t key_at(const uint8_t* keys, size_t i, size_t key_bytes) {
  uint64_t v = 0;
  std::memcpy(&v, keys + i * key_bytes, key_bytes);  // little-endian: the low bytes of v
  return v;
}

void check_device(const void* p, size_t bytes, const char* what) {
  if (bytes == 0) return;
  auto a = find_allocation(p, bytes);
  if (!a || a->kind != MemoryKind::kDevice)
    fatal(std::string("cub::DeviceRadixSort: ") + what + " (" + std::to_string(bytes) +
          " bytes) is not inside a device allocation");
}

}  // namespace

size_t radix_sort_workspace(size_t items, size_t key_bytes, size_t value_bytes) {
  return 256 + items * (key_bytes + value_bytes);  // a double buffer, as CUB's own needs
}

cudaError_t radix_sort(const void* keys_in, void* keys_out, const void* values_in, void* values_out, size_t items,
                       size_t key_bytes, size_t value_bytes, int begin_bit, int end_bit, size_t workspace_bytes,
                       cudaStream_t stream) {
  if (workspace_bytes < radix_sort_workspace(items, key_bytes, value_bytes)) return cudaErrorInvalidValue;
  if (begin_bit < 0 || end_bit > static_cast<int>(key_bytes * 8) || begin_bit > end_bit) return cudaErrorInvalidValue;
  if (items == 0) return cudaSuccess;
  check_device(keys_in, items * key_bytes, "keys_in");
  check_device(keys_out, items * key_bytes, "keys_out");
  if (value_bytes > 0) {
    check_device(values_in, items * value_bytes, "values_in");
    check_device(values_out, items * value_bytes, "values_out");
  }
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  OpSpec op;
  op.kind = OpKind::kKernel;
  op.run = [=] {
    const auto* in = static_cast<const uint8_t*>(keys_in);
    const int bits = end_bit - begin_bit;
    const uint64_t mask = bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
    std::vector<size_t> order(items);
    std::iota(order.begin(), order.end(), size_t{0});
    std::vector<uint64_t> sort_key(items);
    for (size_t i = 0; i < items; ++i) sort_key[i] = (key_at(in, i, key_bytes) >> begin_bit) & mask;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sort_key[a] < sort_key[b]; });
    std::vector<uint8_t> keys(items * key_bytes), values(items * value_bytes);
    for (size_t i = 0; i < items; ++i) {
      std::memcpy(keys.data() + i * key_bytes, in + order[i] * key_bytes, key_bytes);
      if (value_bytes)
        std::memcpy(values.data() + i * value_bytes, static_cast<const uint8_t*>(values_in) + order[i] * value_bytes,
                    value_bytes);
    }
    std::memcpy(keys_out, keys.data(), keys.size());
    if (value_bytes) std::memcpy(values_out, values.data(), values.size());
  };
  return enqueue(s, std::move(op));
}

}  // namespace qrt::simt::detail
