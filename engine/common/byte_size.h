// Why: memory sizes are given on command lines (`mixtrain plan
// --memory-per-worker 80GiB`, a worker's memory limit) the way people
// write them, and read back the same way everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mixtrain {

// Bytes of `text`: a non-negative number (decimals allowed) with an
// optional unit, B, KiB/MiB/GiB/TiB (also K, M, G, T: powers of 1024) or
// kB/MB/GB/TB (powers of 1000), e.g. "80GiB", "1.5T", "512MB", "4096".
// nullopt when malformed, negative or above 2^62 bytes.
std::optional<int64_t> parse_byte_size(std::string_view text);

}  // namespace mixtrain
