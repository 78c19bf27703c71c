// Why: see little_endian.h.
#include "engine/common/little_endian.h"

namespace mixtrain {

void append_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint64_t read_le(std::string_view in) {
  uint64_t value = 0;
  for (size_t i = 0; i < in.size() && i < 8; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return value;
}

std::string encode_frame(std::string_view body) {
  std::string frame;
  frame.reserve(kFrameHeaderBytes + body.size());
  append_le(frame, body.size(), kFrameHeaderBytes);
  frame.append(body);
  return frame;
}

uint32_t frame_body_size(std::string_view header) {
  return static_cast<uint32_t>(read_le(header.substr(0, kFrameHeaderBytes)));
}

}  // namespace mixtrain
