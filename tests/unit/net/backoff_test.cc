// Why: every reconnect loop of the agent and the CLI is paced by
// net::Backoff; its delays, its reset on success and its end after an
// outage are the contract those loops rely on.
#include "net/backoff.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace mixtrain::net {
namespace {

using std::chrono::milliseconds;

std::vector<int64_t> delays(Backoff& backoff, int count) {
  std::vector<int64_t> out;
  for (int i = 0; i < count; ++i) out.push_back(backoff.next().value().count());
  return out;
}

TEST(BackoffTest, DoublesUpToTheCapAndResetsOnSuccess) {
  Backoff backoff(milliseconds(100), milliseconds(2000));
  EXPECT_TRUE(backoff.connected());
  EXPECT_EQ(delays(backoff, 7), (std::vector<int64_t>{100, 200, 400, 800, 1600, 2000, 2000}));
  EXPECT_FALSE(backoff.connected());
  backoff.reset();
  EXPECT_TRUE(backoff.connected());
  EXPECT_EQ(backoff.next().value().count(), 100);
}

TEST(BackoffTest, WithoutALimitNeverGivesUp) {
  Backoff backoff(milliseconds(1), milliseconds(1));
  backoff.next();
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_TRUE(backoff.next().has_value());
}

TEST(BackoffTest, GivesUpOnceAnOutageOutlastsTheLimitAndStartsAfreshAfterASuccess) {
  Backoff backoff(milliseconds(500), milliseconds(5000), milliseconds(0));
  ASSERT_TRUE(backoff.next().has_value());  // the first failure starts the clock
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_FALSE(backoff.next().has_value());
  backoff.reset();
  EXPECT_EQ(backoff.next().value().count(), 500);
}

}  // namespace
}  // namespace mixtrain::net
