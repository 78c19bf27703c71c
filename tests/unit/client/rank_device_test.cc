// Why: a rank's GPU is chosen by its place on its own machine, not by its
// global rank (issue 31): with ranks started by hand on several machines
// (MIXTRAIN_LOCAL_RANK) the global rank says nothing of which GPUs the
// machine has. These pin the launcher's environment and the choice.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "launch/local_ranks.h"

namespace mixtrain {
namespace {

// Sets the launcher's variables for one rank; unsets them on destruction.
struct RankVariables {
  RankVariables(int rank, int world, const char* local_rank) {
    setenv("MIXTRAIN_RANK", std::to_string(rank).c_str(), 1);
    setenv("MIXTRAIN_WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("MIXTRAIN_STORE", "10.0.0.1:29500", 1);
    if (local_rank != nullptr) setenv("MIXTRAIN_LOCAL_RANK", local_rank, 1);
  }
  ~RankVariables() {
    for (const char* name :
         {"MIXTRAIN_RANK", "MIXTRAIN_WORLD_SIZE", "MIXTRAIN_STORE", "MIXTRAIN_LOCAL_RANK"})
      unsetenv(name);
  }
};

// The GPU of each rank of machines started by hand, one launcher per
// machine: `gpus[i]` GPUs and as many ranks on machine i.
std::vector<int> devices_of(const std::vector<int>& gpus) {
  int world = 0;
  for (int count : gpus) world += count;
  std::vector<int> devices;
  int rank = 0;
  for (int count : gpus) {
    for (int local = 0; local < count; ++local, ++rank) {
      RankVariables vars(rank, world, std::to_string(local).c_str());
      const std::optional<launch::RankEnvironment> env = launch::rank_environment();
      EXPECT_TRUE(env.has_value());
      EXPECT_EQ(env->rank, rank);
      devices.push_back(default_cuda_device(env->local_rank, count));
    }
  }
  return devices;
}

TEST(RankDevice, TwoMachinesOfTwoGpusGiveEachRankItsMachinesGpu) {
  EXPECT_EQ(devices_of({2, 2}), (std::vector<int>{0, 1, 0, 1}));
}

TEST(RankDevice, UnevenMachinesOfThreeAndOneGpuGiveRankThreeGpuZero) {
  EXPECT_EQ(devices_of({3, 1}), (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(devices_of({1, 3}), (std::vector<int>{0, 0, 1, 2}));
}

TEST(RankDevice, WithoutALocalRankTheRankIsOnOneMachine) {
  RankVariables vars(3, 4, nullptr);
  const std::optional<launch::RankEnvironment> env = launch::rank_environment();
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 3);
}

// The store's address is read as every HOST:PORT is (host_port.h): an
// IPv6 host in brackets loses them, a port out of range is refused.
TEST(RankDevice, TheStoresAddressMayBeIpv6InBrackets) {
  RankVariables vars(0, 2, nullptr);
  setenv("MIXTRAIN_STORE", "[fd00::2]:29500", 1);
  const std::optional<launch::RankEnvironment> env = launch::rank_environment();
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->store_host, "fd00::2");
  EXPECT_EQ(env->store_port, 29500);
  setenv("MIXTRAIN_STORE", "10.0.0.1:70000", 1);
  EXPECT_THROW(launch::rank_environment(), EngineError);
}

TEST(RankDevice, ALocalRankBeyondTheRankIsRefused) {
  RankVariables vars(1, 4, "2");
  EXPECT_THROW(launch::rank_environment(), EngineError);
}

}  // namespace
}  // namespace mixtrain
