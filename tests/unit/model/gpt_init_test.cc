// Why: the initial weights decide whether training starts sanely; check
// each parameter kind's distribution and that the seed alone decides them.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

struct Moments {
  double mean = 0.0;
  double std_dev = 0.0;
};

Moments moments(const std::vector<float>& w, const ParameterInfo& p) {
  double sum = 0.0, sum_sq = 0.0;
  for (int64_t i = 0; i < p.numel; ++i) {
    sum += w[p.offset + i];
    sum_sq += static_cast<double>(w[p.offset + i]) * w[p.offset + i];
  }
  const double n = static_cast<double>(p.numel);
  return {sum / n, std::sqrt(sum_sq / n - (sum / n) * (sum / n))};
}

class GptInitTest : public ::testing::Test {
 protected:
  GptConfig config_ = example_config();
  ParameterLayout layout_{config_};
  std::vector<float> weights_ = gpt2_init(layout_, config_, 1337);
};

TEST_F(GptInitTest, EveryKindHasItsDistribution) {
  ASSERT_EQ(static_cast<int64_t>(weights_.size()), layout_.numel());
  const double residual_std = 0.02 / std::sqrt(2.0 * 6);
  for (const ParameterInfo& p : layout_.parameters()) {
    switch (p.kind) {
      case ParameterKind::kEmbedding:
      case ParameterKind::kLinearWeight:
      case ParameterKind::kResidualProjectionWeight: {
        // >= 98304 samples: the sample std is within 1% of the true one
        // (its relative standard error is 1/sqrt(2n) < 0.3%).
        const double want =
            p.kind == ParameterKind::kResidualProjectionWeight ? residual_std : 0.02;
        const Moments m = moments(weights_, p);
        EXPECT_NEAR(m.std_dev, want, 0.01 * want) << p.name;
        EXPECT_NEAR(m.mean, 0.0, 0.02 * want) << p.name;
        break;
      }
      case ParameterKind::kLayerNormWeight:
        for (int64_t i = 0; i < p.numel; ++i) ASSERT_EQ(weights_[p.offset + i], 1.0f) << p.name;
        break;
      case ParameterKind::kLinearBias:
      case ParameterKind::kLayerNormBias:
        for (int64_t i = 0; i < p.numel; ++i) ASSERT_EQ(weights_[p.offset + i], 0.0f) << p.name;
        break;
    }
  }
}

TEST_F(GptInitTest, NormalTailsAreGaussian) {
  // About 4.55% of N(0, s) lies beyond 2s; wte has 98304 samples, so the
  // fraction's standard error is 0.07%.
  const ParameterInfo& wte = layout_.wte();
  int64_t beyond = 0;
  for (int64_t i = 0; i < wte.numel; ++i) beyond += std::abs(weights_[wte.offset + i]) > 0.04f;
  EXPECT_NEAR(static_cast<double>(beyond) / static_cast<double>(wte.numel), 0.0455, 0.003);
}

TEST(GptInitSeedTest, TheSeedAloneDecidesTheWeights) {
  const GptConfig config{2, 4, 64, 64, 256};
  const ParameterLayout layout(config);
  const std::vector<float> weights = gpt2_init(layout, config, 1337);
  EXPECT_EQ(gpt2_init(layout, config, 1337), weights);
  EXPECT_NE(gpt2_init(layout, config, 1338), weights);
}

}  // namespace
}  // namespace mixtrain::model_test
