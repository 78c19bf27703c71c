// Why: four byte formats carry little-endian integers: the socket layer's
// frames (engine/socket/socket_io.h), the rendezvous store's fields
// (engine/comm/store_protocol.h), the task process's reports to its agent
// (worker/frame_pipe.h) and the safetensors header's length. Each frame is
// its body's size in 4 bytes, then the body. This is the one codec of
// them all, independent of the host's byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mixtrain {

// The low `bytes` bytes of `value`, least significant first, onto `out`.
void append_le(std::string& out, uint64_t value, size_t bytes);
// The integer whose least significant byte comes first in `in` (at most 8).
uint64_t read_le(std::string_view in);

// The size of the header in front of each frame's body.
inline constexpr size_t kFrameHeaderBytes = 4;
// `body` as one frame: its 4-byte size, then its bytes.
std::string encode_frame(std::string_view body);
// The body size that a frame's header (its first kFrameHeaderBytes bytes)
// announces.
uint32_t frame_body_size(std::string_view header);

}  // namespace mixtrain
