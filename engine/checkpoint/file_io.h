// Why: checkpoints must survive a crash at any instant, so their files are
// written with POSIX calls we can fsync, and read through one read-only
// mapping (common/mapped_file.h) that is both checksummed and parsed (no
// second read, no copy).
// Every failure is an EngineError naming the path and the system error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "engine/common/mapped_file.h"

namespace mixtrain {

// A new file written sequentially; counts the bytes and their CRC32C as
// they pass so the manifest needs no second read.
class FileWriter {
 public:
  // Creates `path`, which must not exist. Throws EngineError(kInternal)
  // naming the path on failure.
  explicit FileWriter(std::filesystem::path path);
  // Closes the descriptor if sync_and_close() was not reached (after an
  // error); the partial file is left for the caller to remove.
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Appends all of `bytes`. Throws EngineError(kInternal) on a write error.
  void write(std::span<const std::byte> bytes);
  // fsyncs and closes the file; no write() may follow. Throws on failure.
  void sync_and_close();

  const std::filesystem::path& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint32_t crc32c() const { return crc32c_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  uint32_t crc32c_ = 0;
};

// fsyncs the directory `path` so that entries created or renamed in it are
// durable. Throws EngineError(kInternal) naming the path on failure.
void fsync_directory(const std::filesystem::path& path);

}  // namespace mixtrain
