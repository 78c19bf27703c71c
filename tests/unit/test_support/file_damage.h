// Why: checkpoint tests, at every level, damage files the ways crashes and
// disks do; these helpers are the one way they do it.
#pragma once

#include <filesystem>
#include <fstream>

namespace mixtrain::test_support {

// Flips one bit 100 bytes before the end of `file`, as a bad disk would:
// the size stays, only a checksum can tell.
inline void flip_bit(const std::filesystem::path& file) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(-100, std::ios::end);
  const char original = static_cast<char>(stream.get());
  stream.seekp(-100, std::ios::end);
  stream.put(static_cast<char>(original ^ 0x10));
}

// Cuts the last 4 bytes off `file`, as a crash mid-write would.
inline void truncate_tail(const std::filesystem::path& file) {
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 4);
}

}  // namespace mixtrain::test_support
