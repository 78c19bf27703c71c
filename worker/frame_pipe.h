// Why: the task process reports to its agent in protobuf messages
// (proto/task_process.proto) over a pipe, which carries bytes, not
// messages. Each message goes as one frame: its size in 4 bytes
// (little-endian), then its bytes. The reader bounds the size, so a child
// that writes garbage costs the agent at most one frame of memory and
// none of its reports after that are believed.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "worker/chunk_splitter.h"

namespace mixtrain::worker {

// `message` as one frame.
std::string encode_frame(const google::protobuf::MessageLite& message);

class FrameSplitter : public ChunkSplitter {
 public:
  // A frame announcing more bytes than this breaks the stream.
  static constexpr uint32_t kMaxFrame = 1 << 20;

  // Calls `on_frame` with each whole frame's message bytes.
  explicit FrameSplitter(std::function<void(std::string_view)> on_frame)
      : on_frame_(std::move(on_frame)) {}

  void add(std::string_view bytes) override;
  // A partial frame at the end (the child died writing it) is dropped.
  void finish() override { pending_.clear(); }

  // True once a frame announced more than kMaxFrame bytes; every byte from
  // there on is ignored, since no later frame boundary can be trusted.
  bool broken() const { return broken_; }

 private:
  std::function<void(std::string_view)> on_frame_;
  std::string pending_;
  bool broken_ = false;
};

}  // namespace mixtrain::worker
