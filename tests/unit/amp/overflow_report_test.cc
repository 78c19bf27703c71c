// Why: the overflow line is what a user reads to find the layer that
// blew up; its wording is shown in the design's example and must name the
// right tensor for the index the backend reported.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/amp/overflow_report.h"
#include "engine/amp/scale_format.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

const std::vector<std::string> kNames = {"transformer.wte.weight",
                                         "transformer.h.3.mlp.c_fc.weight",
                                         "transformer.ln_f.bias"};

NonFiniteCheck found_at(int index, bool is_nan) {
  NonFiniteCheck check;
  check.found = true;
  check.tensor_index = index;
  check.is_nan = is_nan;
  return check;
}

TEST(OverflowReportTest, DescribesBackoff) {
  LossScalerConfig config;
  config.init_scale = 65536.0f;
  LossScaler scaler(config);
  const NonFiniteCheck check = found_at(1, false);
  const StepDecision d = scaler.update(true, 41, nonfinite_tensor_name(kNames, check));
  EXPECT_EQ(describe_overflow(41, kNames, check, d),
            "step 41: overflow in transformer.h.3.mlp.c_fc.weight grad (inf); loss scale "
            "65536 -> 32768, step skipped");
}

TEST(OverflowReportTest, DescribesNanAndDeferredBackoff) {
  LossScalerConfig config;
  config.hysteresis = 2;
  LossScaler scaler(config);
  const NonFiniteCheck check = found_at(2, true);
  const StepDecision d = scaler.update(true, 9);
  EXPECT_EQ(describe_overflow(9, kNames, check, d),
            "step 9: overflow in transformer.ln_f.bias grad (nan); loss scale 65536 kept "
            "(hysteresis), step skipped");
}

TEST(OverflowReportTest, DescribesUnchangedScale) {
  LossScalerConfig config;
  config.mode = LossScaleMode::kNone;
  LossScaler scaler(config);
  const StepDecision d = scaler.update(true, 3);
  EXPECT_EQ(describe_overflow(3, kNames, found_at(0, false), d),
            "step 3: overflow in transformer.wte.weight grad (inf); loss scale 1 kept, step "
            "skipped");
}

TEST(OverflowReportTest, RejectsMismatchedInputs) {
  EXPECT_THROW(nonfinite_tensor_name(kNames, found_at(3, false)), EngineError);
  EXPECT_THROW(nonfinite_tensor_name(kNames, found_at(-1, false)), EngineError);
  EXPECT_THROW(nonfinite_tensor_name(kNames, NonFiniteCheck{}), EngineError);
  StepDecision applied;
  applied.skip = false;
  EXPECT_THROW(describe_overflow(1, kNames, found_at(0, false), applied), EngineError);
}

TEST(ScaleFormatTest, PrintsShortestExactText) {
  EXPECT_EQ(format_scale(65536.0f), "65536");
  EXPECT_EQ(format_scale(1048576.0f), "1048576");
  EXPECT_EQ(format_scale(0.5f), "0.5");
  EXPECT_EQ(format_scale(1.0f), "1");
}

}  // namespace
}  // namespace mixtrain
