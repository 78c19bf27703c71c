// Why: see store_protocol.h. Integers go through little_endian.h, so the
// format does not depend on the host's byte order.
#include "engine/comm/store_protocol.h"

#include "engine/common/error.h"
#include "engine/common/little_endian.h"

namespace mixtrain {

WireWriter& WireWriter::u8(uint8_t value) {
  append_le(body_, value, 1);
  return *this;
}

WireWriter& WireWriter::u32(uint32_t value) {
  append_le(body_, value, 4);
  return *this;
}

WireWriter& WireWriter::i64(int64_t value) {
  append_le(body_, static_cast<uint64_t>(value), 8);
  return *this;
}

WireWriter& WireWriter::bytes(std::string_view value) {
  u32(static_cast<uint32_t>(value.size()));
  body_.append(value);
  return *this;
}

std::string_view WireReader::take(size_t n) {
  if (n > rest_.size()) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "malformed store message: a field runs past the end of the frame");
  }
  const std::string_view field = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return field;
}

uint8_t WireReader::u8() { return static_cast<uint8_t>(read_le(take(1))); }
uint32_t WireReader::u32() { return static_cast<uint32_t>(read_le(take(4))); }
int64_t WireReader::i64() { return static_cast<int64_t>(read_le(take(8))); }
std::string_view WireReader::bytes() { return take(u32()); }

void WireReader::expect_end() const {
  if (!rest_.empty()) {
    throw EngineError(
        ErrorCode::kInvalidArgument,
        "malformed store message: " + std::to_string(rest_.size()) + " unexpected trailing bytes");
  }
}

}  // namespace mixtrain
