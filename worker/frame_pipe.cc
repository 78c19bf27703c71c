// Why: see frame_pipe.h.
#include "worker/frame_pipe.h"

namespace mixtrain::worker {
namespace {

constexpr size_t kHeader = 4;

}  // namespace

std::string encode_frame(const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  const auto size = static_cast<uint32_t>(body.size());
  std::string frame(kHeader, '\0');
  for (size_t i = 0; i < kHeader; ++i) frame[i] = static_cast<char>((size >> (8 * i)) & 0xFF);
  return frame + body;
}

void FrameSplitter::add(std::string_view bytes) {
  if (broken_) return;
  pending_.append(bytes);
  size_t used = 0;
  while (pending_.size() - used >= kHeader) {
    uint32_t size = 0;
    for (size_t i = 0; i < kHeader; ++i) {
      size |= static_cast<uint32_t>(static_cast<unsigned char>(pending_[used + i])) << (8 * i);
    }
    if (size > kMaxFrame) {
      broken_ = true;
      pending_.clear();
      return;
    }
    if (pending_.size() - used - kHeader < size) break;
    on_frame_(std::string_view(pending_).substr(used + kHeader, size));
    used += kHeader + size;
  }
  pending_.erase(0, used);
}

}  // namespace mixtrain::worker
