// Why: the learning rate at each step must be llm.c's (0-based steps,
// warmup lr*(s+1)/W, cosine to min_lr at total_steps); an off-by-one here
// shifts every parity run against llm.c or nanoGPT.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "engine/common/error.h"
#include "engine/optim/lr_schedule.h"

namespace mixtrain {
namespace {

LrSchedule gpt_schedule() {
  LrScheduleConfig config;
  config.lr = 6e-4;
  config.min_lr = 6e-5;
  config.warmup_steps = 100;
  config.total_steps = 2000;
  return LrSchedule(config);
}

TEST(LrScheduleTest, WarmupIsLinearFromTheFirstStep) {
  const LrSchedule schedule = gpt_schedule();
  EXPECT_DOUBLE_EQ(schedule.lr_at(0), 6e-4 * 1 / 100);
  EXPECT_DOUBLE_EQ(schedule.lr_at(49), 6e-4 * 50 / 100);
  EXPECT_DOUBLE_EQ(schedule.lr_at(99), 6e-4);
}

TEST(LrScheduleTest, CosineDecayFromPeakToMinLr) {
  const LrSchedule schedule = gpt_schedule();
  EXPECT_DOUBLE_EQ(schedule.lr_at(100), 6e-4);                       // ratio 0
  EXPECT_DOUBLE_EQ(schedule.lr_at(1050), 6e-5 + 0.5 * (6e-4 - 6e-5));  // ratio 1/2
  const double ratio = (1999.0 - 100.0) / 1900.0;
  EXPECT_DOUBLE_EQ(schedule.lr_at(1999),
                   6e-5 + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (6e-4 - 6e-5));
  EXPECT_DOUBLE_EQ(schedule.lr_at(2000), 6e-5);
  EXPECT_DOUBLE_EQ(schedule.lr_at(5000), 6e-5);
  for (int64_t step = 101; step < 2000; ++step) {
    ASSERT_LT(schedule.lr_at(step), schedule.lr_at(step - 1)) << "step " << step;
  }
}

TEST(LrScheduleTest, NoWarmupStartsAtPeak) {
  LrScheduleConfig config;
  config.lr = 1e-3;
  config.min_lr = 0.0;
  config.warmup_steps = 0;
  config.total_steps = 10;
  const LrSchedule schedule(config);
  EXPECT_DOUBLE_EQ(schedule.lr_at(0), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.lr_at(5), 0.5e-3);
}

TEST(LrScheduleTest, WarmupOverTheWholeRunNeverDecays) {
  LrScheduleConfig config;
  config.lr = 1e-3;
  config.min_lr = 1e-4;
  config.warmup_steps = 4;
  config.total_steps = 4;
  const LrSchedule schedule(config);
  EXPECT_DOUBLE_EQ(schedule.lr_at(3), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.lr_at(4), 1e-4);
}

TEST(LrScheduleTest, RejectsImpossibleSettings) {
  const auto message_of = [](LrScheduleConfig config) -> std::string {
    try {
      LrSchedule schedule(config);
    } catch (const EngineError& error) {
      return error.what();
    }
    return "";
  };
  LrScheduleConfig config;
  config.total_steps = 100;
  config.min_lr = 1e-3;  // above lr 6e-4
  EXPECT_NE(message_of(config).find("train.min_lr"), std::string::npos);
  config = LrScheduleConfig{};
  config.lr = -1.0;
  EXPECT_NE(message_of(config).find("train.lr"), std::string::npos);
  config = LrScheduleConfig{};
  config.min_lr = 0.0;
  config.total_steps = 0;
  EXPECT_NE(message_of(config).find("train.steps"), std::string::npos);
  config.total_steps = 10;
  config.warmup_steps = 11;
  EXPECT_NE(message_of(config).find("train.warmup_steps"), std::string::npos);
  EXPECT_THROW(gpt_schedule().lr_at(-1), EngineError);
}

}  // namespace
}  // namespace mixtrain
