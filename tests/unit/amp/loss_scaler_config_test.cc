// Why: a bad precision setting must be rejected before training with the
// job-spec key in the message, and the string forms must round-trip, since
// the job spec parser relies on both.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "engine/amp/loss_scaler_config.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

// Runs validate() and returns the error message ("" when it passed).
std::string validation_error(const LossScalerConfig& config) {
  try {
    config.validate();
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  return "";
}

TEST(LossScalerConfigTest, DefaultsAreGradScalersAndValid) {
  const LossScalerConfig config;
  EXPECT_EQ(config.mode, LossScaleMode::kDynamic);
  EXPECT_EQ(config.init_scale, 65536.0f);
  EXPECT_EQ(config.growth_factor, 2.0f);
  EXPECT_EQ(config.backoff_factor, 0.5f);
  EXPECT_EQ(config.growth_interval, 2000);
  EXPECT_EQ(config.hysteresis, 1);
  EXPECT_EQ(config.min_scale, 1.0f);
  EXPECT_EQ(config.max_scale, std::nullopt);
  EXPECT_EQ(config.on_min_scale, OnMinScale::kFail);
  EXPECT_EQ(validation_error(config), "");
}

struct BadField {
  const char* key;
  std::function<void(LossScalerConfig&)> spoil;
};

TEST(LossScalerConfigTest, EachBadFieldIsNamed) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const BadField cases[] = {
      {"precision.growth_factor", [](LossScalerConfig& c) { c.growth_factor = 1.0f; }},
      {"precision.growth_factor", [](LossScalerConfig& c) { c.growth_factor = 0.5f; }},
      {"precision.growth_factor", [=](LossScalerConfig& c) { c.growth_factor = inf; }},
      {"precision.growth_factor", [=](LossScalerConfig& c) { c.growth_factor = nan; }},
      {"precision.backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = 1.0f; }},
      {"precision.backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = 0.0f; }},
      {"precision.backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = 2.0f; }},
      {"precision.backoff_factor", [=](LossScalerConfig& c) { c.backoff_factor = nan; }},
      {"precision.growth_interval", [](LossScalerConfig& c) { c.growth_interval = 0; }},
      {"precision.hysteresis", [](LossScalerConfig& c) { c.hysteresis = 0; }},
      {"precision.min_scale", [](LossScalerConfig& c) { c.min_scale = 0.0f; }},
      {"precision.min_scale", [](LossScalerConfig& c) { c.min_scale = -1.0f; }},
      {"precision.min_scale", [=](LossScalerConfig& c) { c.min_scale = inf; }},
      {"precision.init_scale", [=](LossScalerConfig& c) { c.init_scale = inf; }},
      {"precision.init_scale", [=](LossScalerConfig& c) { c.init_scale = nan; }},
      {"precision.init_scale",
       [](LossScalerConfig& c) {
         c.init_scale = 2.0f;
         c.min_scale = 4.0f;
       }},
      {"precision.max_scale", [](LossScalerConfig& c) { c.max_scale = 1024.0f; }},  // < init
      {"precision.max_scale", [=](LossScalerConfig& c) { c.max_scale = inf; }},
      {"precision.max_scale", [=](LossScalerConfig& c) { c.max_scale = nan; }},
  };
  for (const BadField& bad : cases) {
    LossScalerConfig config;
    bad.spoil(config);
    const std::string message = validation_error(config);
    EXPECT_NE(message.find(bad.key), std::string::npos) << "message: " << message;
  }
}

TEST(LossScalerConfigTest, InitScaleEqualToMinScaleIsValid) {
  LossScalerConfig config;
  config.init_scale = 1.0f;
  config.min_scale = 1.0f;
  EXPECT_EQ(validation_error(config), "");
}

}  // namespace
}  // namespace mixtrain
