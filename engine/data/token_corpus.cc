// Why: the storage side of token_corpus.h: widening copies for batches,
// shared slices, and the counted bytes of a corpus held in memory.
#include "engine/data/token_corpus.h"

#include "engine/common/error.h"

namespace mixtrain {
namespace {

// Bytes of a corpus held in process memory, counted as host `data` for as
// long as they live.
class CountedBytes {
 public:
  CountedBytes(std::string bytes, MemoryTracker& tracker)
      : bytes_(std::move(bytes)), tracker_(tracker) {
    tracker_.check_ram_limit(MemoryPool::kHost, MemoryCategory::kData, bytes_.size());
    tracker_.on_alloc(MemoryPool::kHost, MemoryCategory::kData, bytes_.size());
  }
  ~CountedBytes() { tracker_.on_free(MemoryPool::kHost, MemoryCategory::kData, bytes_.size()); }
  CountedBytes(const CountedBytes&) = delete;
  CountedBytes& operator=(const CountedBytes&) = delete;

  const std::byte* data() const { return reinterpret_cast<const std::byte*>(bytes_.data()); }
  size_t size() const { return bytes_.size(); }

 private:
  const std::string bytes_;
  MemoryTracker& tracker_;
};

}  // namespace

TokenCorpus::TokenCorpus(std::shared_ptr<const void> storage, const std::byte* first, size_t count,
                         TokenWidth width)
    : storage_(std::move(storage)), first_(first), size_(count), width_(width) {}

TokenCorpus TokenCorpus::in_memory(std::string bytes, TokenWidth width, MemoryTracker& tracker) {
  const size_t token_bytes = static_cast<size_t>(width);
  MIXTRAIN_CHECK_ARG(bytes.size() % token_bytes == 0,
                     "a corpus of " + std::to_string(bytes.size()) +
                         " bytes is not a whole number of " + std::to_string(token_bytes) +
                         "-byte tokens");
  auto counted = std::make_shared<const CountedBytes>(std::move(bytes), tracker);
  const std::byte* first = counted->data();
  const size_t count = counted->size() / token_bytes;
  return TokenCorpus(std::move(counted), first, count, width);
}

void TokenCorpus::copy_to(size_t first, size_t count, int32_t* out) const {
  if (width_ == TokenWidth::kByte) {
    const std::byte* in = first_ + first;
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(in[i]);
    return;
  }
  for (size_t i = 0; i < count; ++i) out[i] = (*this)[first + i];
}

TokenCorpus TokenCorpus::slice(size_t first, size_t count) const {
  MIXTRAIN_CHECK_ARG(first <= size_ && count <= size_ - first,
                     "tokens " + std::to_string(first) + " + " + std::to_string(count) +
                         " lie outside a corpus of " + std::to_string(size_));
  return TokenCorpus(storage_, first_ + first * static_cast<size_t>(width_), count, width_);
}

}  // namespace mixtrain
