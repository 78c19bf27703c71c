// Why: the little-endian codec carries every frame between ranks, store
// and agent and the safetensors header's length, and HOST:PORT text is
// how every address travels; both are the one home of their format
// (little_endian.h, host_port.h), so their edges are pinned here.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "engine/common/host_port.h"
#include "engine/common/little_endian.h"

namespace mixtrain {
namespace {

TEST(LittleEndian, IntegersRoundTripLeastSignificantByteFirst) {
  std::string out;
  append_le(out, 0x0102030405060708ull, 8);
  EXPECT_EQ(out, std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(read_le(out), 0x0102030405060708ull);
  out.clear();
  append_le(out, 0xFFFFFFFFull + 2, 4);  // only the low 4 bytes
  EXPECT_EQ(read_le(out), 1u);
  EXPECT_EQ(read_le(""), 0u);
}

TEST(LittleEndian, AFrameIsItsBodysSizeThenTheBody) {
  const std::string body(300, 'x');
  const std::string frame = encode_frame(body);
  ASSERT_EQ(frame.size(), kFrameHeaderBytes + 300);
  EXPECT_EQ(frame.substr(0, 4), std::string("\x2c\x01\x00\x00", 4));
  EXPECT_EQ(frame_body_size(frame), 300u);
  EXPECT_EQ(frame.substr(kFrameHeaderBytes), body);
  EXPECT_EQ(frame_body_size(encode_frame("")), 0u);
  EXPECT_EQ(frame_body_size(std::string("\xff\xff\xff\xff", 4)), 0xFFFFFFFFu);
}

TEST(HostPort, SplitsAtTheLastColonAndDropsIpv6Brackets) {
  std::optional<HostPort> a = parse_host_port("coord:50051");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "coord");
  EXPECT_EQ(a->port, 50051);
  std::optional<HostPort> b = parse_host_port("[fd00::1]:0");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->host, "fd00::1");
  EXPECT_EQ(b->port, 0);
  for (const char* bad : {"coord", ":50051", "coord:", "coord:x1", "coord:65536", "coord:-1"})
    EXPECT_FALSE(parse_host_port(bad).has_value()) << bad;
}

TEST(HostPort, JoinsIpv6InBracketsSoItSplitsBack) {
  EXPECT_EQ(join_host_port("10.0.0.2", 9100), "10.0.0.2:9100");
  EXPECT_EQ(join_host_port("::1", 9100), "[::1]:9100");
  const std::optional<HostPort> back = parse_host_port(join_host_port("fd00::7", 80));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, "fd00::7");
}

}  // namespace
}  // namespace mixtrain
