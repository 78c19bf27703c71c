// Why: after a partition, a rank of a superseded attempt may still run and
// checkpoint into the job's directory while the restarted attempt writes
// there (issue 12: the new attempt died on "step 3500 already exists" while
// the stale rank went on committing and pruning). A trainer of attempt N
// must neither commit nor prune once attempt N+1 claimed the directory, and
// a trainer of the newer attempt replaces a step the stale one committed.
#include <gtest/gtest.h>

#include "engine/checkpoint/checkpoint_fence.h"
#include "engine/checkpoint/checkpoint_store.h"
#include "engine/common/error.h"
#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

TEST(CheckpointFenceTest, ClaimsOnlyRiseAndAnOlderEpochIsRefused) {
  const std::filesystem::path dir = fresh_dir("fence");
  EXPECT_EQ(checkpoint_epoch(dir), 0);  // absent
  claim_checkpoint_epoch(dir, 1);
  claim_checkpoint_epoch(dir, 1);  // ranks of one attempt all claim
  EXPECT_EQ(checkpoint_epoch(dir), 1);
  claim_checkpoint_epoch(dir, 3);
  EXPECT_EQ(checkpoint_epoch(dir), 3);
  try {
    claim_checkpoint_epoch(dir, 2);
    FAIL() << "a superseded attempt claimed the directory";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("attempt 2 was superseded, attempt 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(checkpoint_epoch(dir), 3);
  EXPECT_THROW(check_checkpoint_epoch(dir, 2, "commit a checkpoint"), EngineError);
  EXPECT_NO_THROW(check_checkpoint_epoch(dir, 3, "commit a checkpoint"));
  EXPECT_NO_THROW(check_checkpoint_epoch(dir, 0, "commit a checkpoint"));  // unfenced
  // Claims are not checkpoints.
  EXPECT_TRUE(list_checkpoints(dir).empty());
}

TEST(CheckpointFenceTest, ASupersededTrainerNeitherCommitsNorPrunes) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("stale");
  config::JobSpec spec = tiny_spec(DType::kBF16, 12, dir);
  spec.checkpoint.every = 2;
  spec.checkpoint.keep = 1;
  claim_checkpoint_epoch(dir, 1);
  TrainerOptions options;
  options.checkpoint_epoch = 1;
  // Attempt 2 claims the directory while this one is at step 3.
  options.progress.on_step = [&](const StepProgress& step) {
    if (step.step == 3) claim_checkpoint_epoch(dir, 2);
  };
  Trainer stale(*backend, spec, options);
  try {
    stale.run();
    FAIL() << "the superseded trainer finished";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition) << e.what();
    EXPECT_NE(std::string(e.what()).find("superseded"), std::string::npos) << e.what();
  }
  // Step 2 (committed before the claim) is still there: no step 4, no prune.
  const std::vector<CheckpointInfo> left = list_checkpoints(dir);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].step, 2);
}

TEST(CheckpointFenceTest, TheNewerAttemptReplacesAStepTheSupersededOneCommitted) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::filesystem::path dir = fresh_dir("replace");
  config::JobSpec spec = tiny_spec(DType::kBF16, 4, dir);
  spec.checkpoint.every = 2;
  // The stale attempt 1 got to commit steps 2 and 4 before it was fenced.
  TrainerOptions first;
  first.checkpoint_epoch = 1;
  claim_checkpoint_epoch(dir, 1);
  Trainer stale(*backend, spec, first);
  stale.run();
  ASSERT_EQ(list_checkpoints(dir).size(), 2u);
  // Attempt 2 resumed from step 2 (it claimed before the stale commit of 4).
  claim_checkpoint_epoch(dir, 2);
  TrainerOptions second;
  second.checkpoint_epoch = 2;
  second.resume_dir = dir / checkpoint_dir_name(2);
  Trainer restarted(*backend, spec, second);
  EXPECT_NO_THROW(restarted.run());  // without the fence: "step 4 already exists"
  EXPECT_EQ(latest_checkpoint(dir)->step, 4);
  EXPECT_TRUE(same_bits(master_of(stale), master_of(restarted)));
}

}  // namespace
}  // namespace mixtrain::train_test
