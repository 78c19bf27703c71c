// Why: checkpoint manifests carry a checksum of every data file so that a
// truncated or bit-flipped file is refused before any tensor is used.
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, as in iSCSI, ext4
// and leveldb) is implemented here, table-driven (slicing-by-8), so the
// engine needs no library for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mixtrain {

// Extends `crc` (the value returned for the bytes before `data`; 0 for the
// start of a stream) over `data`. crc32c_extend(0, "123456789") == 0xE3069283.
uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data);

// CRC32C of `data` alone.
inline uint32_t crc32c(std::span<const std::byte> data) { return crc32c_extend(0, data); }

}  // namespace mixtrain
