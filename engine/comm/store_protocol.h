// Why: the TCP store's wire format, in one place for the server and the
// client. Each message is one frame (socket_io.h) whose body is built from
// little-endian integers and length-prefixed byte strings:
//
//   request  = op:u8 fields...       reply = status:u8 fields...
//   set  key value            ->  ok
//   get  key timeout_ms:i64   ->  ok value         | unavailable message
//   wait n:u32 key*n timeout  ->  ok               | unavailable message
//   add  key delta:i64        ->  ok value:i64     | invalid_argument message
//   byte string = length:u32 bytes
//
// A malformed request gets invalid_argument and the server closes that
// connection; the reader never reads past the frame it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mixtrain {

enum class StoreOp : uint8_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4 };
enum class StoreStatus : uint8_t { kOk = 0, kUnavailable = 1, kInvalidArgument = 2 };

// Largest frame either side accepts: a 64 MiB value plus its key.
inline constexpr size_t kMaxStoreFrameBytes = (size_t{64} << 20) + (size_t{64} << 10);

class WireWriter {
 public:
  WireWriter& u8(uint8_t value);
  WireWriter& u32(uint32_t value);
  WireWriter& i64(int64_t value);
  WireWriter& bytes(std::string_view value);
  const std::string& body() const { return body_; }

 private:
  std::string body_;
};

// Reads the fields of one frame in order. Every read past the end, and
// expect_end() with bytes left, throws EngineError(kInvalidArgument)
// "malformed store message".
class WireReader {
 public:
  explicit WireReader(std::string_view body) : rest_(body) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  std::string_view bytes();
  void expect_end() const;

 private:
  std::string_view take(size_t n);
  std::string_view rest_;
};

}  // namespace mixtrain
