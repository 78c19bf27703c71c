// Why: a resumed run must continue exactly as if it had never stopped (the
// checkpoint carries every weight, moment and counter), find the newest
// checkpoint in a run's directory that verifies, and refuse a checkpoint of
// another model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/train/trainer_checkpoint_files.h"
#include "test_support/engine_error.h"
#include "test_support/file_damage.h"
#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kHalf = 6;

// A spec whose fp16 runs skip steps and change the scale both before and
// after the checkpoint at kHalf, so the scaler state must round-trip.
config::JobSpec resume_spec(DType compute, const std::filesystem::path& dir) {
  config::JobSpec spec = tiny_spec(compute, 2 * kHalf, dir);
  spec.checkpoint.every = kHalf;
  spec.train.eval_every = 4;
  if (compute == DType::kF16) {
    spec.precision.init_scale = std::ldexp(1.0, 24);
    spec.precision.growth_interval = 2;
  }
  return spec;
}

class TrainerResumeTest : public ::testing::TestWithParam<DType> {};

TEST_P(TrainerResumeTest, ResumedRunIsBitIdenticalToStraightRun) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path straight_dir = fresh_dir("straight");
  Trainer straight(*backend, resume_spec(GetParam(), straight_dir));
  const TrainSummary straight_summary = straight.run();
  ASSERT_EQ(list_checkpoints(straight_dir).size(), 2u);  // steps kHalf and 2*kHalf

  TrainerOptions options;
  options.resume_dir = straight_dir / checkpoint_dir_name(kHalf);
  options.checkpoint_dir = fresh_dir("resumed");
  Trainer resumed(*backend, resume_spec(GetParam(), straight_dir), options);
  EXPECT_EQ(resumed.step(), kHalf);
  const TrainSummary resumed_summary = resumed.run();

  EXPECT_TRUE(same_bits(master_of(straight), master_of(resumed)));
  EXPECT_EQ(resumed_summary.steps, 2 * kHalf);
  EXPECT_EQ(resumed_summary.skipped_steps, straight_summary.skipped_steps);
  EXPECT_EQ(resumed_summary.nonfinite_events, straight_summary.nonfinite_events);
  EXPECT_EQ(resumed_summary.loss_scale, straight_summary.loss_scale);
  EXPECT_EQ(resumed_summary.final_train_loss, straight_summary.final_train_loss);
  EXPECT_EQ(resumed_summary.final_val_loss, straight_summary.final_val_loss);
  if (GetParam() == DType::kF16) {
    EXPECT_GT(straight_summary.skipped_steps, 0);
  }
}

// A stop request (preemption) ends the run after the step it is seen at,
// with a checkpoint of that step off the checkpoint.every grid; resuming
// from it ends bit-identical to a run never stopped.
TEST_P(TrainerResumeTest, AStoppedRunCheckpointsItsStepAndResumesExactly) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer straight(*backend, resume_spec(GetParam(), fresh_dir("straight")));
  straight.run();

  const std::filesystem::path dir = fresh_dir("stopped");
  std::atomic<bool> stop{false};
  TrainerOptions options;
  options.stop_requested = &stop;
  options.progress.on_step = [&](const StepProgress& step) {
    if (step.step == kHalf + 1) stop.store(true);
  };
  Trainer stopped(*backend, resume_spec(GetParam(), dir), options);
  const TrainSummary summary = stopped.run();
  EXPECT_EQ(summary.status, "preempted");
  EXPECT_EQ(summary.steps, kHalf + 1);
  ASSERT_TRUE(latest_checkpoint(dir).has_value());
  EXPECT_EQ(latest_checkpoint(dir)->step, kHalf + 1);

  TrainerOptions resume;
  resume.resume_dir = dir;
  Trainer resumed(*backend, resume_spec(GetParam(), dir), resume);
  EXPECT_EQ(resumed.step(), kHalf + 1);
  EXPECT_EQ(resumed.run().status, "succeeded");
  EXPECT_TRUE(same_bits(master_of(straight), master_of(resumed)));
}

INSTANTIATE_TEST_SUITE_P(ComputeDtypes, TrainerResumeTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Compute fp8 for each recipe: the delayed recipe's scales and amax
// histories (short, so they roll past the checkpoint) must come back too.
class TrainerFp8ResumeTest : public ::testing::TestWithParam<config::Fp8Scaling> {};

TEST_P(TrainerFp8ResumeTest, ResumedRunIsBitIdenticalToStraightRun) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  auto spec_for = [](const std::filesystem::path& dir) {
    config::JobSpec spec = resume_spec(DType::kFP8E4M3, dir);
    spec.precision.fp8 = config::Fp8Spec{};
    spec.precision.fp8->scaling = GetParam();
    spec.precision.fp8->amax_history = 3;
    return spec;
  };
  const std::filesystem::path straight_dir = fresh_dir("straight");
  Trainer straight(*backend, spec_for(straight_dir));
  const TrainSummary straight_summary = straight.run();
  EXPECT_EQ(straight_summary.compute_dtype, "fp8");
  ASSERT_TRUE(straight_summary.ranks[0].fp8_saturated.has_value());
  const TrainSummary read =
      TrainSummary::from_json(parse_json(dump_json(straight_summary.to_json())));
  EXPECT_EQ(read.ranks[0].fp8_saturated, straight_summary.ranks[0].fp8_saturated);

  TrainerOptions options;
  options.resume_dir = straight_dir / checkpoint_dir_name(kHalf);
  options.checkpoint_dir = fresh_dir("resumed");
  Trainer resumed(*backend, spec_for(straight_dir), options);
  const TrainSummary resumed_summary = resumed.run();
  EXPECT_TRUE(same_bits(master_of(straight), master_of(resumed)));
  EXPECT_EQ(resumed_summary.final_train_loss, straight_summary.final_train_loss);
  EXPECT_EQ(resumed_summary.final_val_loss, straight_summary.final_val_loss);

  // The checkpoint carries the recipe: for delayed, scales that moved off
  // 1 and 3 steps of history for each of 3 tensors of 4 GEMMs per block.
  const TrainerCheckpoint saved =
      open_trainer_checkpoint(straight_dir / checkpoint_dir_name(kHalf));
  ASSERT_TRUE(saved.fp8_recipe.has_value());
  const size_t slots = 3 * 4 * 2;  // tiny_spec has 2 layers; the head stays bf16
  if (GetParam() == config::Fp8Scaling::kDelayed) {
    ASSERT_EQ(saved.fp8_recipe->size(), slots * (1 + 3));
    EXPECT_TRUE(std::any_of(saved.fp8_recipe->begin(), saved.fp8_recipe->begin() + slots,
                            [](float scale) { return scale != 1.0f; }));
  } else {
    EXPECT_EQ(saved.fp8_recipe->size(), slots);
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, TrainerFp8ResumeTest,
                         ::testing::Values(config::Fp8Scaling::kDelayed,
                                           config::Fp8Scaling::kCurrent,
                                           config::Fp8Scaling::kMxfp8),
                         [](const auto& info) {
                           return std::string(config::enum_name(info.param));
                         });

TEST(TrainerResumeDirTest, RunDirectoryResumesFromItsNewestCheckpoint) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("run");
  config::JobSpec spec = resume_spec(DType::kBF16, dir);
  spec.checkpoint.every = 2;  // checkpoints at 2, 4, ..., 12; keep 3
  Trainer straight(*backend, spec);
  straight.run();
  ASSERT_EQ(list_checkpoints(dir).size(), 3u);
  std::filesystem::remove_all(dir / checkpoint_dir_name(2 * kHalf));  // newest left: 10

  TrainerOptions options;
  options.resume_dir = dir;
  Trainer resumed(*backend, spec, options);
  EXPECT_EQ(resumed.step(), 2 * kHalf - 2);
  resumed.run();
  EXPECT_TRUE(same_bits(master_of(straight), master_of(resumed)));
  EXPECT_EQ(latest_checkpoint(dir)->step, 2 * kHalf);  // written again at the end
}

// A bit flip in the newest checkpoint (still listed: its sizes match) and a
// truncated shard in the one before: the resume passes over both, saying
// which and why, continues from the newest that verifies and ends bit for
// bit where the straight run did, the damaged directories kept aside.
TEST(TrainerResumeDirTest, PassesOverDamagedCheckpointsToTheNewestThatVerifies) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("run");
  config::JobSpec spec = resume_spec(DType::kBF16, dir);
  spec.checkpoint.every = 2;  // checkpoints at 2, 4, ..., 12; keep 3: 8, 10, 12
  Trainer straight(*backend, spec);
  straight.run();
  const std::string shard = "shard-00000-of-00001.safetensors";
  test_support::flip_bit(dir / checkpoint_dir_name(12) / shard);
  test_support::truncate_tail(dir / checkpoint_dir_name(10) / shard);

  TrainerOptions options;
  options.resume_dir = dir;
  std::vector<std::string> lines;
  options.progress.on_log = [&lines](const std::string& line) { lines.push_back(line); };
  Trainer resumed(*backend, spec, options);
  EXPECT_EQ(resumed.step(), 8);
  ASSERT_EQ(lines.size(), 3u);
  const std::string passing_over = "resume: passing over checkpoint ";
  EXPECT_THAT(lines[0], StartsWith(passing_over + (dir / checkpoint_dir_name(12)).string()));
  EXPECT_THAT(lines[0], HasSubstr("has CRC32C"));
  EXPECT_THAT(lines[1], StartsWith(passing_over + (dir / checkpoint_dir_name(10)).string()));
  EXPECT_THAT(lines[1], HasSubstr("(truncated or replaced)"));
  EXPECT_EQ(lines[2], "resume: resuming from checkpoint " +
                          (dir / checkpoint_dir_name(8)).string() + " (step 8)");
  resumed.run();
  EXPECT_TRUE(same_bits(master_of(straight), master_of(resumed)));
  for (int64_t step : {10, 12}) {
    EXPECT_TRUE(std::filesystem::is_directory(dir / (checkpoint_dir_name(step) + ".damaged-1")))
        << step;
  }
  EXPECT_EQ(latest_checkpoint(dir)->step, 12);
}

TEST(TrainerResumeDirTest, RefusesARunDirectoryWhoseCheckpointsAllFailToVerify) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("run");
  Trainer(*backend, tiny_spec(DType::kF32, 2, dir)).run();
  test_support::flip_bit(dir / checkpoint_dir_name(2) / "shard-00000-of-00001.safetensors");
  TrainerOptions options;
  options.resume_dir = dir;
  EXPECT_TRUE(test_support::throws_invalid_argument(
      [&] { Trainer(*backend, tiny_spec(DType::kF32, 4, dir), options); },
      {"no checkpoint in " + dir.string() + " verifies", "step_00000002", "has CRC32C"}));
}

TEST(TrainerResumeDirTest, RefusesACheckpointOfAnotherModelShape) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("run");
  Trainer(*backend, tiny_spec(DType::kF32, 2, dir)).run();

  config::JobSpec wider = tiny_spec(DType::kF32, 4, fresh_dir("wider"));
  wider.model.dim = 64;
  TrainerOptions options;
  options.resume_dir = dir;
  try {
    Trainer resumed(*backend, wider, options);
    FAIL() << "expected the resume to be refused";
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    const std::string message = error.what();
    EXPECT_NE(message.find("cannot resume"), std::string::npos) << message;
    EXPECT_NE(message.find("model.dim 32 vs 64"), std::string::npos) << message;
  }
}

TEST(TrainerResumeDirTest, RefusesACheckpointOfAnotherComputeDtype) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("run");
  Trainer(*backend, tiny_spec(DType::kF32, 2, dir)).run();

  TrainerOptions options;
  options.resume_dir = dir;
  try {
    Trainer resumed(*backend, tiny_spec(DType::kBF16, 4, fresh_dir("bf16")), options);
    FAIL() << "expected the resume to be refused";
  } catch (const EngineError& error) {
    EXPECT_NE(std::string(error.what()).find("precision.compute fp32"), std::string::npos)
        << error.what();
  }
}

TEST(TrainerResumeDirTest, RefusesADirectoryWithoutCheckpoints) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  TrainerOptions options;
  options.resume_dir = fresh_dir("empty");
  std::filesystem::create_directories(*options.resume_dir);
  EXPECT_THROW(Trainer(*backend, tiny_spec(DType::kF32, 2, fresh_dir("ckpt")), options),
               EngineError);
}

}  // namespace
}  // namespace mixtrain::train_test
