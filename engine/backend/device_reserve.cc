// Why: see device_reserve.h.
#include "engine/backend/device_reserve.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace mixtrain {
namespace {

// What a context holds on a Hopper GPU with CUDA 12's lazy loading once
// our kernels and cuBLASLt's have run: measured contexts take 300-500 MiB.
constexpr int64_t kRuntimeBytes = int64_t{512} << 20;

// NCCL's default buffer per protocol: simple 4 MiB; LL128 120 elements
// of 8 bytes per thread, 640 threads, 8 steps; LL 8 lines of 16 bytes
// per thread, 512 threads, 8 steps.
constexpr int64_t kSimpleBytes = int64_t{4} << 20;
constexpr int64_t kLl128Bytes = int64_t{120} * 8 * 640 * 8;
constexpr int64_t kLlBytes = int64_t{8} * 16 * 512 * 8;

// `name`'s value as a byte count from 1 up to 1 TiB, else `fallback` (as
// NCCL ignores a value it cannot read; no GPU holds more).
int64_t env_bytes(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  int64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [last, error] = std::from_chars(text, end, value);
  return error == std::errc() && last == end && value > 0 && value <= (int64_t{1} << 40)
             ? value
             : fallback;
}

}  // namespace

DeviceReserve device_reserve(int64_t world_size) {
  DeviceReserve reserve;
  reserve.runtime = kRuntimeBytes;
  if (world_size > 1) {
    const int64_t per_connection = env_bytes("NCCL_BUFFSIZE", kSimpleBytes) +
                                   env_bytes("NCCL_LL128_BUFFSIZE", kLl128Bytes) +
                                   env_bytes("NCCL_LL_BUFFSIZE", kLlBytes);
    const int64_t connections = 1 + std::min<int64_t>(3, world_size - 1);
    reserve.nccl = kNcclMaxChannels * connections * per_connection;
  }
  return reserve;
}

}  // namespace mixtrain
