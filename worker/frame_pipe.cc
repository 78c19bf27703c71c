// Why: see frame_pipe.h.
#include "worker/frame_pipe.h"

#include "engine/common/little_endian.h"

namespace mixtrain::worker {

std::string encode_frame(const google::protobuf::MessageLite& message) {
  return mixtrain::encode_frame(message.SerializeAsString());
}

void FrameSplitter::add(std::string_view bytes) {
  if (broken_) return;
  pending_.append(bytes);
  size_t used = 0;
  while (pending_.size() - used >= kFrameHeaderBytes) {
    const uint32_t size = frame_body_size(std::string_view(pending_).substr(used));
    if (size > kMaxFrame) {
      broken_ = true;
      pending_.clear();
      return;
    }
    if (pending_.size() - used - kFrameHeaderBytes < size) break;
    on_frame_(std::string_view(pending_).substr(used + kFrameHeaderBytes, size));
    used += kFrameHeaderBytes + size;
  }
  pending_.erase(0, used);
}

}  // namespace mixtrain::worker
