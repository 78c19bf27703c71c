// Why: the clip factor must be clip_grad_norm_'s, epsilon included, or
// clipped runs drift from PyTorch's from the first clipped step.
#include <gtest/gtest.h>

#include <limits>

#include "engine/common/error.h"
#include "engine/optim/grad_clip.h"

namespace mixtrain {
namespace {

TEST(GradClipTest, ScalesDownNormsAboveMax) {
  EXPECT_EQ(clip_coefficient(2.0, 1.0), static_cast<float>(1.0 / (2.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(10.0, 0.5), static_cast<float>(0.5 / (10.0 + 1e-6)));
}

TEST(GradClipTest, LeavesNormsAtOrBelowMaxAlone) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);
  // Exactly at max_norm the epsilon makes the factor just below 1, as in torch.
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.0f);
}

TEST(GradClipTest, MaxNormZeroDisablesClipping) {
  EXPECT_EQ(clip_coefficient(1e6, 0.0), 1.0f);
}

TEST(GradClipTest, RejectsNonFiniteOrNegativeInputs) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(clip_coefficient(inf, 1.0), EngineError);
  EXPECT_THROW(clip_coefficient(std::numeric_limits<double>::quiet_NaN(), 1.0), EngineError);
  EXPECT_THROW(clip_coefficient(-1.0, 1.0), EngineError);
  EXPECT_THROW(clip_coefficient(1.0, -1.0), EngineError);
}

}  // namespace
}  // namespace mixtrain
