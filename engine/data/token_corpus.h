// Why: a corpus may be larger than a rank's memory. Reading a 1.2 GB text
// file into a vector of uint16 cost 2.4 GB that no memory category counted
// (issue 29), so a worker's --memory-limit did not hold. A TokenCorpus is a
// read-only view of tokens stored one byte each (text: each byte is its
// token) or as little-endian uint16 (llm.c token files), either in a file
// mapped read-only (page cache, which the kernel may reclaim, held by no
// process) or in process memory counted by the MemoryTracker as host
// `data`. Slices share the storage, so a train/val split copies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/memory_tracker.h"

namespace mixtrain {

class TokenCorpus {
 public:
  // How many bytes store one token: text 1, llm.c token files 2.
  enum class TokenWidth : int { kByte = 1, kUint16 = 2 };

  // `count` tokens of `width` starting at `first`, which `storage` keeps
  // alive (a mapped file, or counted bytes in memory).
  TokenCorpus(std::shared_ptr<const void> storage, const std::byte* first, size_t count,
              TokenWidth width);

  // `bytes` (tokens of `width`, little-endian) held in process memory and
  // counted in `tracker` (which must outlive every copy and slice) as host
  // `data` until the last of them is gone. Throws EngineError(kOutOfMemory)
  // naming the data category when they would pass the tracker's RAM limit.
  static TokenCorpus in_memory(std::string bytes, TokenWidth width, MemoryTracker& tracker);

  size_t size() const { return size_; }
  TokenWidth width() const { return width_; }

  // Token `index`; requires index < size().
  uint16_t operator[](size_t index) const {
    const std::byte* at = first_ + index * static_cast<size_t>(width_);
    if (width_ == TokenWidth::kByte) return static_cast<uint16_t>(at[0]);
    return static_cast<uint16_t>(static_cast<uint16_t>(at[0]) | static_cast<uint16_t>(at[1]) << 8);
  }

  // Writes tokens [first, first + count) to out[0 .. count). Requires
  // first + count <= size().
  void copy_to(size_t first, size_t count, int32_t* out) const;

  // Tokens [first, first + count), sharing this corpus's storage. Throws
  // EngineError(kInvalidArgument) unless first + count <= size().
  TokenCorpus slice(size_t first, size_t count) const;

 private:
  std::shared_ptr<const void> storage_;
  const std::byte* first_ = nullptr;
  size_t size_ = 0;
  TokenWidth width_ = TokenWidth::kByte;
};

}  // namespace mixtrain
