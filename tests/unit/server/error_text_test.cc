// Why: a status message longer than the peer's metadata limit replaces
// itself with "received initial metadata size exceeds limit" (issue 29),
// so every message is cut to its first problems that fit, saying how many
// more there were, and never split inside a UTF-8 character.
#include "server/error_text.h"

#include <gtest/gtest.h>

#include <string>

namespace mixtrain::server {
namespace {

std::string numbered_lines(int count, size_t width) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    if (i > 0) text += '\n';
    const std::string number = std::to_string(i);
    text += number + std::string(width - number.size(), '.');
  }
  return text;
}

TEST(BoundedErrorText, KeepsATextWithinTheBoundsAsItIs) {
  const std::string text = numbered_lines(int(kMaxErrorLines), 100);
  EXPECT_EQ(bounded_error_text(text), text);
  EXPECT_EQ(bounded_error_text(""), "");
}

TEST(BoundedErrorText, KeepsTheFirstLinesAndCountsTheOthers) {
  EXPECT_EQ(bounded_error_text(numbered_lines(int(kMaxErrorLines) + 10, 10)),
            numbered_lines(int(kMaxErrorLines), 10) + "\n... and 10 more");
  // Lines of 1000 bytes: two fit in the byte bound.
  EXPECT_EQ(bounded_error_text(numbered_lines(5, 1000)), numbered_lines(2, 1000) + "\n... and 3 more");
}

TEST(BoundedErrorText, CutsALongFirstLineAtACharacterBoundary) {
  const std::string plain(3 * kMaxErrorBytes, 'x');
  std::string text = "x";  // shifts every two-byte character to end past an odd bound
  for (size_t i = 0; i < kMaxErrorBytes; ++i) text += "\xC3\xA9";  // é
  text += "\nsecond";
  const std::string bounded = bounded_error_text(text);
  ASSERT_GE(bounded.size(), 20u);
  EXPECT_LE(bounded.size(), kMaxErrorBytes + 32);
  const std::string suffix = " [cut]\n... and 1 more";
  ASSERT_EQ(bounded.substr(bounded.size() - suffix.size()), suffix);
  const std::string kept = bounded.substr(0, bounded.size() - suffix.size());
  EXPECT_EQ(kept.size() % 2, 1u);  // "x" and whole characters
  EXPECT_EQ(text.compare(0, kept.size(), kept), 0);
  EXPECT_EQ(bounded_error_text(plain), plain.substr(0, kMaxErrorBytes) + " [cut]");
}

TEST(BoundedStatus, BoundsTheMessageAndKeepsTheCode) {
  const grpc::Status status(grpc::StatusCode::INVALID_ARGUMENT, numbered_lines(40, 10));
  const grpc::Status bounded = bounded_status(status);
  EXPECT_EQ(bounded.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bounded.error_message(), numbered_lines(int(kMaxErrorLines), 10) + "\n... and 20 more");
  EXPECT_TRUE(bounded_status(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace mixtrain::server
