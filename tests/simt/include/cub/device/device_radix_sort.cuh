// cub::DeviceRadixSort for the SIMT layer: the sort runs on the CPU as an op of the given stream, stable and by the
// key bits [begin_bit, end_bit) as CUB's is, after the same two-call workspace protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda_runtime.h"

namespace qrt::simt::detail {
// Bytes of workspace the layer asks for (so callers that size and pass it are exercised).
size_t radix_sort_workspace(size_t items, size_t key_bytes, size_t value_bytes);
// Enqueues: sort `items` keys (and values, if given) by bits [begin_bit, end_bit) of their unsigned image.
cudaError_t radix_sort(const void* keys_in, void* keys_out, const void* values_in, void* values_out, size_t items,
                       size_t key_bytes, size_t value_bytes, int begin_bit, int end_bit,
                       size_t workspace_bytes, cudaStream_t stream);
}  // namespace qrt::simt::detail

namespace cub {

struct DeviceRadixSort {
  template <class KeyT, class NumItemsT>
  static cudaError_t SortKeys(void* d_temp_storage, size_t& temp_storage_bytes, const KeyT* d_keys_in,
                              KeyT* d_keys_out, NumItemsT num_items, int begin_bit = 0,
                              int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<KeyT>, "the SIMT layer's radix sort models unsigned keys");
    const size_t items = static_cast<size_t>(num_items);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = qrt::simt::detail::radix_sort_workspace(items, sizeof(KeyT), 0);
      return cudaSuccess;
    }
    return qrt::simt::detail::radix_sort(d_keys_in, d_keys_out, nullptr, nullptr, items, sizeof(KeyT), 0,
                                         begin_bit, end_bit, temp_storage_bytes, stream);
  }

  template <class KeyT, class ValueT, class NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes, const KeyT* d_keys_in,
                               KeyT* d_keys_out, const ValueT* d_values_in, ValueT* d_values_out, NumItemsT num_items,
                               int begin_bit = 0, int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<KeyT>, "the SIMT layer's radix sort models unsigned keys");
    const size_t items = static_cast<size_t>(num_items);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = qrt::simt::detail::radix_sort_workspace(items, sizeof(KeyT), sizeof(ValueT));
      return cudaSuccess;
    }
    return qrt::simt::detail::radix_sort(d_keys_in, d_keys_out, d_values_in, d_values_out, items, sizeof(KeyT),
                                         sizeof(ValueT), begin_bit, end_bit, temp_storage_bytes, stream);
  }
};

}  // namespace cub
