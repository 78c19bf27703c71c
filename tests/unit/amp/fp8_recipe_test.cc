// Why: the recipe's state is what makes delayed fp8 scaling resume bit for
// bit and agree across ranks; these pin its bookkeeping (the rules
// themselves are checked against TE's in fp8_delayed_scaling_reference.py).
#include "engine/amp/fp8_recipe.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

constexpr auto kAct = Fp8TensorKind::kActivation;
constexpr auto kWeight = Fp8TensorKind::kWeight;
constexpr auto kGrad = Fp8TensorKind::kGradOutput;

Fp8RecipeSettings delayed(int64_t history) {
  Fp8RecipeSettings s;
  s.amax_history = history;
  return s;
}

TEST(Fp8Recipe, DelayedScaleFollowsTheStepsAmaxAcrossMicroBatches) {
  Fp8Recipe recipe(delayed(4), 2);
  EXPECT_EQ(recipe.scale(1, kAct), 1.0f);
  recipe.begin_step();
  recipe.record(1, kAct, {2.0f, 3}, 1.0f);
  recipe.record(1, kAct, {7.0f, 1}, 1.0f);  // a second micro-batch: the max counts
  recipe.record(1, kGrad, {0.5f, 0}, 1.0f);
  recipe.end_step();
  EXPECT_EQ(recipe.scale(1, kAct), 448.0f / 7.0f);
  EXPECT_EQ(recipe.scale(1, kGrad), 57344.0f / 0.5f);  // hybrid: E5M2 gradients
  EXPECT_EQ(recipe.scale(0, kWeight), 1.0f);           // nothing recorded: kept
  EXPECT_EQ(recipe.stats(kAct).amax, 7.0f);
  EXPECT_EQ(recipe.stats(kAct).saturated, 4);
  EXPECT_EQ(recipe.stats(kAct).min_scale, 1.0f);             // the scale the step's records used
  EXPECT_TRUE(std::isnan(recipe.stats(kWeight).min_scale));  // never recorded
  // Outside a step nothing is recorded.
  recipe.record(1, kAct, {1000.0f, 9}, 1.0f);
  EXPECT_EQ(recipe.stats(kAct).saturated, 4);
}

TEST(Fp8Recipe, HistoryRemembersTheLargestAmaxForItsLength) {
  Fp8Recipe recipe(delayed(3), 1);
  const float amaxes[] = {8.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const float want[] = {56.0f, 56.0f, 56.0f, 448.0f, 448.0f};  // 8 stays for 3 steps
  for (int t = 0; t < 5; ++t) {
    recipe.begin_step();
    recipe.record(0, kAct, {amaxes[t], 0}, 1.0f);
    recipe.end_step();
    EXPECT_EQ(recipe.scale(0, kAct), want[t]) << "step " << t + 1;
  }
}

TEST(Fp8Recipe, StepAmaxesAreWhatTheRanksReduce) {
  Fp8Recipe recipe(delayed(2), 1);
  recipe.begin_step();
  recipe.record(0, kWeight, {1.0f, 0}, 1.0f);
  // Another rank saw a larger weight amax: the reduced value wins.
  recipe.step_amaxes()[1] = 4.0f;
  recipe.end_step();
  EXPECT_EQ(recipe.scale(0, kWeight), 112.0f);
}

TEST(Fp8Recipe, CurrentAndBlockScalingKeepNoScales) {
  for (config::Fp8Scaling scaling : {config::Fp8Scaling::kCurrent, config::Fp8Scaling::kMxfp8}) {
    Fp8RecipeSettings settings;
    settings.scaling = scaling;
    Fp8Recipe recipe(settings, 1);
    recipe.begin_step();
    recipe.record(0, kAct, {3.0f, 2}, 1.0f);
    recipe.end_step();
    EXPECT_EQ(recipe.scale(0, kAct), 1.0f);
    EXPECT_EQ(recipe.stats(kAct).amax, 3.0f);
    EXPECT_EQ(recipe.stats(kAct).saturated, 2);
  }
}

TEST(Fp8Recipe, StateRestoresExactlyAndRefusesAnotherShape) {
  Fp8Recipe recipe(delayed(5), 3);
  for (int t = 0; t < 4; ++t) {
    recipe.begin_step();
    recipe.record(t % 3, kGrad, {static_cast<float>(t + 1) * 0.1f, 0}, 1.0f);
    recipe.end_step();
  }
  Fp8Recipe resumed(delayed(5), 3);
  resumed.restore(recipe.state());
  EXPECT_EQ(resumed.state(), recipe.state());
  for (Fp8Recipe* r : {&recipe, &resumed}) {
    r->begin_step();
    r->record(2, kGrad, {0.01f, 0}, 1.0f);
    r->end_step();
  }
  EXPECT_EQ(resumed.state(), recipe.state());
  Fp8Recipe longer(delayed(6), 3);
  EXPECT_THROW(longer.restore(recipe.state()), EngineError);
}

TEST(Fp8Recipe, SettingsFollowTheSpec) {
  config::Fp8Spec spec;
  spec.format = config::Fp8FormatChoice::kE4M3;
  spec.margin = 2;
  const Fp8RecipeSettings settings = fp8_recipe_settings(spec);
  EXPECT_EQ(settings.backward_format, Fp8Format::kE4M3);
  EXPECT_EQ(settings.margin, 2);
  EXPECT_EQ(fp8_recipe_settings(config::Fp8Spec{}).backward_format, Fp8Format::kE5M2);
  Fp8Recipe recipe(settings, 1);
  recipe.begin_step();
  recipe.record(0, kGrad, {1.0f, 0}, 1.0f);
  recipe.end_step();
  EXPECT_EQ(recipe.scale(0, kGrad), 112.0f);  // 448 * 2^-2 / 1
}

}  // namespace
}  // namespace mixtrain
