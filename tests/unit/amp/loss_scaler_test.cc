// Why: the loss scaler decides which steps are applied and which scale
// every later step uses; a wrong count here silently changes training. The
// expected sequences follow PyTorch's GradScaler (torch/amp/grad_scaler.py,
// _amp_update_scale_: growth after growth_interval consecutive clean steps,
// backoff and counter reset on inf/NaN) and DeepSpeed's DynamicLossScaler
// (deepspeed/runtime/fp16/loss_scaler.py, update_scale with
// consecutive_hysteresis=False): with hysteresis H, an overflow only
// decrements cur_hysteresis while it is above 1; at 1 the scale backs off
// (and cur_hysteresis stays 1); cur_hysteresis returns to H only when a
// scale_window of clean steps grows the scale; a backoff due at min_scale
// raises when raise_error_at_min_scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/amp/loss_scaler.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

LossScalerConfig dynamic_config(int64_t growth_interval, int64_t hysteresis = 1) {
  LossScalerConfig config;
  config.mode = LossScaleMode::kDynamic;
  config.init_scale = 1024.0f;
  config.growth_interval = growth_interval;
  config.hysteresis = hysteresis;
  return config;
}

// Feeds `clean` clean steps starting at step `first` and checks none changes the scale.
void clean_steps_without_growth(LossScaler& scaler, int64_t first, int clean) {
  for (int i = 0; i < clean; ++i) {
    const float before = scaler.scale();
    const StepDecision d = scaler.update(false, first + i);
    EXPECT_FALSE(d.skip);
    EXPECT_FALSE(d.scale_changed) << "clean step " << i;
    EXPECT_EQ(d.new_scale, before);
  }
}

TEST(LossScalerTest, GrowsAfterExactlyGrowthIntervalCleanSteps) {
  LossScaler scaler(dynamic_config(4));
  EXPECT_EQ(scaler.scale(), 1024.0f);
  clean_steps_without_growth(scaler, 1, 3);
  StepDecision d = scaler.update(false, 4);
  EXPECT_FALSE(d.skip);
  EXPECT_TRUE(d.scale_changed);
  EXPECT_EQ(d.old_scale, 1024.0f);
  EXPECT_EQ(d.new_scale, 2048.0f);
  EXPECT_EQ(scaler.scale(), 2048.0f);
  // The counter restarted: the next growth needs another 4 clean steps.
  clean_steps_without_growth(scaler, 5, 3);
  d = scaler.update(false, 8);
  EXPECT_EQ(d.new_scale, 4096.0f);
  EXPECT_EQ(scaler.overflow_steps(), 0);
}

// GradScaler's _amp_update_scale_ kernel takes the factors as doubles:
// *scale = *scale * backoff_factor promotes the fp32 scale to double and
// rounds the product to fp32 once. With 0.8 (not exact in binary) the
// sequence differs from fp32 arithmetic (0.8f * scale, rounded) after the
// first backoff; the scaler must give GradScaler's.
TEST(LossScalerTest, FactorsApplyInDoubleAndRoundOnceAsGradScaler) {
  LossScalerConfig config = dynamic_config(3);
  config.init_scale = 65536.0f;
  config.backoff_factor = 0.8;
  config.growth_factor = 1.1;
  LossScaler scaler(config);
  float grad_scaler = 65536.0f;  // the kernel's arithmetic, transcribed
  float fp32_only = 65536.0f;    // what float factors would give
  int tracker = 0;
  int differs = 0;
  // Overflows on steps where step % 5 == 1, clean otherwise: backoffs and
  // growths interleave.
  for (int64_t step = 1; step <= 60; ++step) {
    const bool overflow = step % 5 == 1;
    if (overflow) {
      grad_scaler = static_cast<float>(static_cast<double>(grad_scaler) * 0.8);
      fp32_only = fp32_only * 0.8f;
      tracker = 0;
    } else if (++tracker == 3) {
      grad_scaler = static_cast<float>(static_cast<double>(grad_scaler) * 1.1);
      fp32_only = fp32_only * 1.1f;
      tracker = 0;
    }
    const StepDecision d = scaler.update(overflow, step);
    ASSERT_EQ(d.new_scale, grad_scaler) << "step " << step;
    differs += fp32_only != grad_scaler ? 1 : 0;
  }
  EXPECT_GT(differs, 0);  // the test tells the two arithmetics apart
}

TEST(LossScalerTest, GrowthStopsAtMaxScale) {
  LossScalerConfig config = dynamic_config(2);
  config.init_scale = 1024.0f;
  config.max_scale = 3000.0f;
  LossScaler scaler(config);
  scaler.update(false, 1);
  EXPECT_EQ(scaler.update(false, 2).new_scale, 2048.0f);
  scaler.update(false, 3);
  StepDecision d = scaler.update(false, 4);
  EXPECT_EQ(d.new_scale, 3000.0f);  // 4096 capped
  EXPECT_TRUE(d.scale_changed);
  scaler.update(false, 5);
  d = scaler.update(false, 6);  // a growth due at the cap changes nothing
  EXPECT_EQ(d.new_scale, 3000.0f);
  EXPECT_FALSE(d.scale_changed);
  EXPECT_EQ(scaler.update(true, 7).new_scale, 1500.0f);  // backoff from the cap as usual
}

TEST(LossScalerTest, OverflowSkipsAndBacksOff) {
  LossScaler scaler(dynamic_config(2000));
  const StepDecision d = scaler.update(true, 1, "wte.weight");
  EXPECT_TRUE(d.skip);
  EXPECT_TRUE(d.scale_changed);
  EXPECT_FALSE(d.backoff_deferred);
  EXPECT_EQ(d.old_scale, 1024.0f);
  EXPECT_EQ(d.new_scale, 512.0f);
  EXPECT_EQ(scaler.scale(), 512.0f);
  EXPECT_EQ(scaler.overflow_steps(), 1);
}

TEST(LossScalerTest, OverflowResetsTheGrowthCounter) {
  LossScaler scaler(dynamic_config(3));
  clean_steps_without_growth(scaler, 1, 2);
  scaler.update(true, 3);
  EXPECT_EQ(scaler.scale(), 512.0f);
  // Two clean steps before the overflow no longer count.
  clean_steps_without_growth(scaler, 4, 2);
  EXPECT_EQ(scaler.update(false, 6).new_scale, 1024.0f);
}

TEST(LossScalerTest, GrowthThatWouldOverflowFp32IsNotApplied) {
  LossScalerConfig config = dynamic_config(1);
  config.init_scale = std::numeric_limits<float>::max();
  LossScaler scaler(config);
  const StepDecision d = scaler.update(false, 1);
  EXPECT_FALSE(d.scale_changed);
  EXPECT_EQ(scaler.scale(), std::numeric_limits<float>::max());
  EXPECT_EQ(scaler.state().growth_tracker, 0);
}

TEST(LossScalerTest, HysteresisTwoDefersTheFirstBackoff) {
  LossScaler scaler(dynamic_config(3, 2));
  // First overflow: skipped, scale kept, one unit of hysteresis used.
  StepDecision d = scaler.update(true, 1);
  EXPECT_TRUE(d.skip);
  EXPECT_TRUE(d.backoff_deferred);
  EXPECT_FALSE(d.scale_changed);
  EXPECT_EQ(scaler.scale(), 1024.0f);
  EXPECT_EQ(scaler.state().hysteresis_left, 1);
  // Second overflow: backs off.
  d = scaler.update(true, 2);
  EXPECT_TRUE(d.skip);
  EXPECT_FALSE(d.backoff_deferred);
  EXPECT_EQ(d.new_scale, 512.0f);
  // Hysteresis stays used up: the third overflow backs off at once.
  d = scaler.update(true, 3);
  EXPECT_EQ(d.new_scale, 256.0f);
  EXPECT_EQ(scaler.overflow_steps(), 3);
  // A growth_interval of clean steps grows the scale and restores it.
  clean_steps_without_growth(scaler, 4, 2);
  EXPECT_EQ(scaler.update(false, 6).new_scale, 512.0f);
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
  d = scaler.update(true, 7);
  EXPECT_TRUE(d.backoff_deferred);
  EXPECT_EQ(scaler.scale(), 512.0f);
}

TEST(LossScalerTest, OneCleanStepDoesNotRestoreHysteresis) {
  LossScaler scaler(dynamic_config(100, 2));
  EXPECT_TRUE(scaler.update(true, 1).backoff_deferred);
  scaler.update(false, 2);
  const StepDecision d = scaler.update(true, 3);
  EXPECT_FALSE(d.backoff_deferred);
  EXPECT_EQ(d.new_scale, 512.0f);
}

TEST(LossScalerTest, HysteresisThreeNeedsThreeOverflows) {
  LossScaler scaler(dynamic_config(100, 3));
  EXPECT_TRUE(scaler.update(true, 1).backoff_deferred);
  EXPECT_TRUE(scaler.update(true, 2).backoff_deferred);
  EXPECT_EQ(scaler.scale(), 1024.0f);
  EXPECT_EQ(scaler.update(true, 3).new_scale, 512.0f);
}

TEST(LossScalerTest, BackoffStopsAtMinScale) {
  LossScalerConfig config = dynamic_config(100);
  config.init_scale = 4.0f;
  config.min_scale = 3.0f;
  config.on_min_scale = OnMinScale::kContinue;
  LossScaler scaler(config);
  EXPECT_EQ(scaler.update(true, 1).new_scale, 3.0f);  // not 2
}

TEST(LossScalerTest, OverflowAtMinScaleFailsNamingStepAndTensor) {
  LossScalerConfig config = dynamic_config(100);
  config.init_scale = 2.0f;
  config.min_scale = 1.0f;
  LossScaler scaler(config);
  scaler.update(true, 6, "h.0.attn.c_attn.weight");  // 2 -> 1
  const LossScalerState before = scaler.state();
  try {
    scaler.update(true, 7, "transformer.h.3.mlp.c_fc.weight");
    FAIL() << "no error at min_scale";
  } catch (const EngineError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("step 7"), std::string::npos) << message;
    EXPECT_NE(message.find("transformer.h.3.mlp.c_fc.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("lower the learning rate"), std::string::npos) << message;
    EXPECT_NE(message.find("bf16"), std::string::npos) << message;
    EXPECT_NE(message.find("on_min_scale: continue"), std::string::npos) << message;
  }
  EXPECT_EQ(scaler.state(), before);
}

TEST(LossScalerTest, OverflowDeferredByHysteresisAtMinScaleDoesNotFail) {
  LossScalerConfig config = dynamic_config(100, 2);
  config.init_scale = 1.0f;
  LossScaler scaler(config);
  EXPECT_TRUE(scaler.update(true, 1, "wpe.weight").backoff_deferred);
  EXPECT_THROW(scaler.update(true, 2, "wpe.weight"), EngineError);
}

TEST(LossScalerTest, OverflowAtMinScaleWithContinueSkipsAndKeepsMinScale) {
  LossScalerConfig config = dynamic_config(100);
  config.init_scale = 1.0f;
  config.on_min_scale = OnMinScale::kContinue;
  LossScaler scaler(config);
  for (int64_t step = 1; step <= 3; ++step) {
    const StepDecision d = scaler.update(true, step);
    EXPECT_TRUE(d.skip);
    EXPECT_FALSE(d.scale_changed);
    EXPECT_EQ(d.new_scale, 1.0f);
  }
  EXPECT_EQ(scaler.overflow_steps(), 3);
}

TEST(LossScalerTest, StaticScaleNeverChangesButSkipsOverflows) {
  LossScalerConfig config = dynamic_config(2);
  config.mode = LossScaleMode::kStatic;
  config.init_scale = 128.0f;
  LossScaler scaler(config);
  EXPECT_EQ(scaler.scale(), 128.0f);
  clean_steps_without_growth(scaler, 1, 5);
  const StepDecision d = scaler.update(true, 6);
  EXPECT_TRUE(d.skip);
  EXPECT_FALSE(d.scale_changed);
  EXPECT_EQ(d.new_scale, 128.0f);
  EXPECT_EQ(scaler.overflow_steps(), 1);
}

TEST(LossScalerTest, NoneModeUsesScaleOneAndStillSkipsOverflows) {
  LossScalerConfig config = dynamic_config(2);
  config.mode = LossScaleMode::kNone;
  LossScaler scaler(config);
  EXPECT_EQ(scaler.scale(), 1.0f);
  clean_steps_without_growth(scaler, 1, 5);
  EXPECT_TRUE(scaler.update(true, 6).skip);
  EXPECT_TRUE(scaler.update(true, 7).skip);
  EXPECT_FALSE(scaler.update(false, 8).skip);
  EXPECT_EQ(scaler.scale(), 1.0f);
  EXPECT_EQ(scaler.overflow_steps(), 2);
}

// A fixed pattern of overflows mixing growths, deferred and real backoffs.
bool overflow_at(int64_t step) { return step % 7 == 3 || step % 11 == 5 || step % 13 == 0; }

TEST(LossScalerTest, RestoredStateGivesIdenticalDecisions) {
  const LossScalerConfig config = dynamic_config(4, 2);
  LossScaler original(config);
  for (int64_t step = 1; step <= 30; ++step) original.update(overflow_at(step), step);
  const LossScalerState saved = original.state();
  EXPECT_NE(saved, LossScaler(config).state());  // the run moved it away from the start

  LossScaler resumed(config);
  resumed.restore(saved);
  EXPECT_EQ(resumed.state(), saved);
  for (int64_t step = 31; step <= 90; ++step) {
    const StepDecision a = original.update(overflow_at(step), step);
    const StepDecision b = resumed.update(overflow_at(step), step);
    ASSERT_EQ(a.skip, b.skip) << "step " << step;
    ASSERT_EQ(a.scale_changed, b.scale_changed) << "step " << step;
    ASSERT_EQ(a.backoff_deferred, b.backoff_deferred) << "step " << step;
    ASSERT_EQ(a.new_scale, b.new_scale) << "step " << step;
  }
  EXPECT_EQ(resumed.state(), original.state());
}

TEST(LossScalerTest, RestoreRejectsStateThatDoesNotFitTheConfig) {
  LossScalerConfig config = dynamic_config(4, 2);
  config.min_scale = 2.0f;
  LossScaler scaler(config);
  const LossScalerState good = scaler.state();
  const auto restore_error = [&](LossScalerState bad) -> std::string {
    try {
      scaler.restore(bad);
    } catch (const EngineError& error) {
      return error.what();
    }
    return "";
  };
  LossScalerState bad = good;
  bad.scale = 1.0f;
  EXPECT_NE(restore_error(bad).find("scale"), std::string::npos);
  bad = good;
  bad.growth_tracker = 4;
  EXPECT_NE(restore_error(bad).find("growth_tracker"), std::string::npos);
  bad = good;
  bad.hysteresis_left = 3;
  EXPECT_NE(restore_error(bad).find("hysteresis_left"), std::string::npos);
  bad = good;
  bad.overflow_steps = -1;
  EXPECT_NE(restore_error(bad).find("overflow_steps"), std::string::npos);
  EXPECT_EQ(scaler.state(), good);  // failed restores changed nothing

  config.mode = LossScaleMode::kStatic;
  LossScaler static_scaler(config);
  LossScalerState other_scale = static_scaler.state();
  other_scale.scale = 512.0f;
  EXPECT_THROW(static_scaler.restore(other_scale), EngineError);
}

TEST(LossScalerTest, ConstructorValidatesTheConfig) {
  LossScalerConfig config;
  config.backoff_factor = 1.5f;
  EXPECT_THROW(LossScaler{config}, EngineError);
}

}  // namespace
}  // namespace mixtrain
