// Why: the planner's device need and the CUDA pool's release threshold
// both read device_reserve (issue 31: NCCL's buffers found no memory left
// at the first collective). Its NCCL figure is NCCL's own arithmetic, so
// it is checked here against those numbers and NCCL's variables.
#include "engine/backend/device_reserve.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>

namespace mixtrain {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// NCCL's defaults per connection: simple, LL128, LL.
constexpr int64_t kPerConnection = 4 * kMiB + 4915200 + 512 * 1024;

class DeviceReserveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"NCCL_BUFFSIZE", "NCCL_LL128_BUFFSIZE", "NCCL_LL_BUFFSIZE"})
      unsetenv(name);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(DeviceReserveTest, OneRankReservesTheRuntimeAndNoNccl) {
  const DeviceReserve reserve = device_reserve(1);
  EXPECT_EQ(reserve.runtime, 512 * kMiB);
  EXPECT_EQ(reserve.nccl, 0);
  EXPECT_EQ(reserve.total(), 512 * kMiB);
}

TEST_F(DeviceReserveTest, NcclBuffersGrowWithTreeConnectionsUpToThree) {
  EXPECT_EQ(device_reserve(2).nccl, kNcclMaxChannels * 2 * kPerConnection);
  EXPECT_EQ(device_reserve(3).nccl, kNcclMaxChannels * 3 * kPerConnection);
  EXPECT_EQ(device_reserve(4).nccl, kNcclMaxChannels * 4 * kPerConnection);
  EXPECT_EQ(device_reserve(64).nccl, kNcclMaxChannels * 4 * kPerConnection);
  EXPECT_EQ(device_reserve(2).runtime, device_reserve(1).runtime);
}

TEST_F(DeviceReserveTest, NcclsVariablesResizeTheBuffersAsTheyResizeNccls) {
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  EXPECT_EQ(device_reserve(2).nccl, kNcclMaxChannels * 2 * (kPerConnection - 3 * kMiB));
  setenv("NCCL_LL128_BUFFSIZE", "0", 1);         // not a size: NCCL's default
  setenv("NCCL_LL_BUFFSIZE", "64KiB", 1);         // not a number: NCCL's default
  EXPECT_EQ(device_reserve(2).nccl, kNcclMaxChannels * 2 * (kPerConnection - 3 * kMiB));
  setenv("NCCL_BUFFSIZE", "9223372036854775807", 1);  // past any GPU: the default
  EXPECT_EQ(device_reserve(2).nccl, kNcclMaxChannels * 2 * kPerConnection);
}

}  // namespace
}  // namespace mixtrain
