// Why: a memory size typed on a command line must read as the person
// meant it, binary units as powers of 1024 and decimal ones of 1000, and
// anything else must be refused rather than read as some other number.
#include "engine/common/byte_size.h"

#include <gtest/gtest.h>

namespace mixtrain {
namespace {

TEST(ParseByteSize, ReadsNumbersWithEveryUnit) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("12B"), 12);
  EXPECT_EQ(parse_byte_size("2K"), 2048);
  EXPECT_EQ(parse_byte_size("2KiB"), 2048);
  EXPECT_EQ(parse_byte_size("2kB"), 2000);
  EXPECT_EQ(parse_byte_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("512MB"), 512'000'000);
  EXPECT_EQ(parse_byte_size("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(parse_byte_size("80G"), int64_t{80} << 30);
  EXPECT_EQ(parse_byte_size("80GB"), 80'000'000'000);
  EXPECT_EQ(parse_byte_size("1.5T"), int64_t{3} << 39);
  EXPECT_EQ(parse_byte_size("0"), 0);
}

TEST(ParseByteSize, RefusesWhatIsNotASize) {
  for (const char* text :
       {"", "GiB", "-1G", "80 GiB", "80GiBs", "80g", "1..5G", "0x10", "1e3", "nan", "5000000T"}) {
    EXPECT_EQ(parse_byte_size(text), std::nullopt) << text;
  }
}

}  // namespace
}  // namespace mixtrain
