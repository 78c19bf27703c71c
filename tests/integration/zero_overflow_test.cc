// Why: DESIGN's data-parallel promise that every rank skips the same steps
// ("the overflow decision is agreed by all ranks") is only worth something
// across real processes, where each rank sees nothing but its own
// gradients and what the ring sends it. This starts 2 and 3 ranks of
// zero_overflow_rank_checks over loopback; each rank checks, at every ZeRO
// stage, that an inf or NaN injected into rank 1's gradient makes it find
// the same parameter, skip the step and back the scale off like the
// others, and that the next clean step leaves the same weights everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "comm/rank_launcher.h"

namespace mixtrain {
namespace {

using std::chrono::seconds;

class ZeroOverflowAcrossProcesses : public testing::TestWithParam<int> {};

TEST_P(ZeroOverflowAcrossProcesses, EveryRankSkipsTheStepAndBacksOffAlike) {
  comm_test::RankGroup group(ZERO_OVERFLOW_RANK_CHECKS_PATH, "Stages/OverflowAgreement.*",
                             GetParam(), seconds(20));
  group.expect_all_passed(seconds(120));
  EXPECT_THAT(group.logs(), testing::Not(testing::HasSubstr("PASSED  ] 0 tests")))
      << "the filter matched no test";
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroOverflowAcrossProcesses, testing::Values(2, 3));

}  // namespace
}  // namespace mixtrain
