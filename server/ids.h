// Why: job and worker ids must stay unique across coordinator restarts
// without coordination, and job rows and workers share one clock; both
// helpers live here once.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>

namespace mixtrain::server {

// Milliseconds since the Unix epoch.
inline int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `prefix` and `hex_digits` (1 to 16) hex digits from the OS's random source.
inline std::string random_id(std::string_view prefix, int hex_digits) {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) | random();
  char digits[17];
  std::snprintf(digits, sizeof(digits), "%016llx", static_cast<unsigned long long>(bits));
  return std::string(prefix) + std::string(digits + 16 - hex_digits);
}

}  // namespace mixtrain::server
