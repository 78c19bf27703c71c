// Why: checkpoints and training corpora are read through one read-only
// mapping each: checksummed and parsed in place, or sampled at random,
// without a copy in process memory (a mapped file costs page cache, which
// the kernel can reclaim, not anonymous memory that counts against a
// rank's limit).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "engine/common/unique_fd.h"

namespace mixtrain {

// A whole file mapped read-only; movable, unmapped on destruction.
class MappedFile {
 public:
  // Maps `path`. Throws EngineError(kInvalidArgument) naming the path if it
  // cannot be opened, kInternal if it cannot be mapped.
  explicit MappedFile(std::filesystem::path path);
  // Maps the file open as `fd` (read-only), named `path` in messages.
  // Throws EngineError(kInternal) naming the path if it cannot be mapped.
  MappedFile(std::filesystem::path path, UniqueFd fd);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The file's bytes as of mapping (empty for an empty file).
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mixtrain
