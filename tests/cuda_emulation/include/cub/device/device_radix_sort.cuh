// Why: the emulation's stand-in for cub's radix sort (cub's own is device
// code): SortPairs as a stable sort by key, which is what cub's radix sort
// is for the full key width (signed keys in numeric order). A partial bit
// range is refused rather than sorted differently. It runs in stream
// order, as queued work (emulated_device.h's enqueue_on).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value>
  static cudaError_t SortPairs(void* temp_storage, size_t& temp_bytes, const Key* keys_in,
                               Key* keys_out, const Value* values_in, Value* values_out, int n,
                               int begin_bit, int end_bit, cudaStream_t stream = nullptr) {
    if (temp_storage == nullptr) {
      temp_bytes = 1;
      return cudaSuccess;
    }
    if (begin_bit != 0 || end_bit != static_cast<int>(sizeof(Key) * 8)) {
      return cudaErrorInvalidValue;
    }
    // Like a kernel, the sort runs when its stream gets there.
    emu::enqueue_on(stream, [=] {
      std::vector<int> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return keys_in[a] < keys_in[b]; });
      std::vector<Key> keys(order.size());
      std::vector<Value> values(order.size());
      for (size_t i = 0; i < order.size(); ++i) {
        keys[i] = keys_in[order[i]];
        values[i] = values_in[order[i]];
      }
      std::copy(keys.begin(), keys.end(), keys_out);
      std::copy(values.begin(), values.end(), values_out);
    });
    return cudaSuccess;
  }
};

}  // namespace cub
