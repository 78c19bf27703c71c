// Why: the loop must actually learn in every compute dtype, recover from
// loss-scale overflows while counting them, be reproducible from its seed,
// and treat gradient accumulation as one larger batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/model/hf_safetensors.h"
#include "engine/model/parameter_layout.h"
#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

struct Recorded {
  std::vector<StepProgress> steps;
  std::vector<EvalProgress> evals;
  std::vector<std::string> lines;
};

TrainerOptions recording(Recorded& out) {
  TrainerOptions options;
  options.progress.on_step = [&out](const StepProgress& p) { out.steps.push_back(p); };
  options.progress.on_eval = [&out](const EvalProgress& p) { out.evals.push_back(p); };
  options.progress.on_log = [&out](const std::string& line) { out.lines.push_back(line); };
  return options;
}

// Mean training loss of steps [begin, end).
double mean_loss(const std::vector<StepProgress>& steps, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += steps[i].loss;
  return sum / static_cast<double>(end - begin);
}

class TrainerConvergenceTest : public ::testing::TestWithParam<DType> {};

TEST_P(TrainerConvergenceTest, LossDecreasesClearlyIn60Steps) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Recorded recorded;
  Trainer trainer(*backend, tiny_spec(GetParam(), 60, fresh_dir("ckpt")), recording(recorded));
  const TrainSummary summary = trainer.run();

  ASSERT_EQ(recorded.steps.size(), 60u);
  EXPECT_NEAR(recorded.steps.front().loss, std::log(256.0), 0.2);  // uniform guess at init
  const double early = mean_loss(recorded.steps, 0, 5);
  const double late = mean_loss(recorded.steps, 55, 60);
  EXPECT_LT(late, early - 1.5) << "early " << early << " late " << late;
  EXPECT_EQ(summary.steps, 60);
  // fp16's dynamic scale starts at 2^16 and may back off once or twice.
  EXPECT_LE(summary.skipped_steps, GetParam() == DType::kF16 ? 3 : 0);
  ASSERT_EQ(recorded.evals.size(), 1u);  // eval_every 1000: only the final one
  EXPECT_EQ(recorded.evals[0].step, 60);
  ASSERT_TRUE(summary.final_val_loss.has_value());
  EXPECT_LT(*summary.final_val_loss, early - 1.5);
  EXPECT_DOUBLE_EQ(*summary.final_train_loss, recorded.steps.back().loss);
}

INSTANTIATE_TEST_SUITE_P(ComputeDtypes, TrainerConvergenceTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(TrainerLossScalingTest, HugeInitialScaleSkipsAndBacksOffThenTrains) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kF16, 60, fresh_dir("ckpt"));
  spec.precision.init_scale = std::ldexp(1.0, 30);
  Recorded recorded;
  Trainer trainer(*backend, spec, recording(recorded));
  const TrainSummary summary = trainer.run();

  const auto skipped = std::count_if(recorded.steps.begin(), recorded.steps.end(),
                                     [](const StepProgress& p) { return p.skipped; });
  ASSERT_GT(skipped, 0);
  EXPECT_TRUE(recorded.steps.front().skipped);
  EXPECT_EQ(summary.skipped_steps, skipped);
  EXPECT_EQ(summary.nonfinite_events, skipped);
  ASSERT_EQ(recorded.lines.size(), static_cast<size_t>(skipped));
  EXPECT_NE(recorded.lines.front().find("step 1: overflow in"), std::string::npos)
      << recorded.lines.front();
  // Each skip (hysteresis 1) halved the scale, and 2000 clean steps never passed.
  EXPECT_EQ(summary.loss_scale, std::ldexp(1.0, 30 - static_cast<int>(skipped)));
  EXPECT_EQ(recorded.steps.front().loss_scale, std::ldexp(1.0, 29));
  for (const StepProgress& p : recorded.steps) {
    if (p.skipped) {
      EXPECT_EQ(p.grad_norm, 0.0);
      // An overflow of scaled fp16 gradients: a finite loss, non-finite gradients.
      EXPECT_TRUE(p.nonfinite_kind == "nan" || p.nonfinite_kind == "inf") << p.nonfinite_kind;
      EXPECT_EQ(p.nonfinite_where, "grads");
    } else {
      EXPECT_TRUE(p.nonfinite_kind.empty());
    }
    EXPECT_GT(p.seconds, 0.0);
    EXPECT_GT(p.tokens, 0.0);
  }
  EXPECT_LT(mean_loss(recorded.steps, 55, 60), mean_loss(recorded.steps, 0, 5) - 1.5);
}

TEST(TrainerLossScalingTest, ScaleStuckAtMinScaleFailsWithFailedPrecondition) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kF16, 5, fresh_dir("ckpt"));
  spec.precision.loss_scale = config::LossScaleMode::kDynamic;
  spec.precision.init_scale = std::ldexp(1.0, 30);
  spec.precision.min_scale = std::ldexp(1.0, 30);  // no room to back off
  Trainer trainer(*backend, spec);
  try {
    trainer.run();
    FAIL() << "expected the loss scaler to stop training";
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kFailedPrecondition);
    EXPECT_NE(std::string(error.what()).find("min_scale"), std::string::npos) << error.what();
  }
}

TEST(TrainerDeterminismTest, SameSeedGivesBitIdenticalWeights) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const config::JobSpec spec = tiny_spec(DType::kBF16, 8, fresh_dir("a"));
  config::JobSpec again = spec;
  again.checkpoint.dir = fresh_dir("b").string();
  Trainer first(*backend, spec);
  first.run();
  Trainer second(*backend, again);
  second.run();
  EXPECT_TRUE(same_bits(master_of(first), master_of(second)));

  config::JobSpec other_seed = spec;
  other_seed.train.seed = 99;
  other_seed.checkpoint.dir = fresh_dir("c").string();
  Trainer third(*backend, other_seed);
  third.run();
  EXPECT_FALSE(same_bits(master_of(first), master_of(third)));
}

TEST(TrainerGradAccumTest, TwoMicroBatchesOfTwoEqualOneOfFour) {
  // The sampler draws the same global windows for the same global batch
  // size, micro-step m taking windows [m*B, (m+1)*B): so the mean of the two
  // micro-batch losses is the loss of the one batch of four.
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const config::JobSpec whole = tiny_spec(DType::kF32, 5, fresh_dir("whole"));
  config::JobSpec split = whole;
  split.train.micro_batch = 2;
  split.train.grad_accum = 2;
  split.checkpoint.dir = fresh_dir("split").string();
  Recorded whole_steps;
  Recorded split_steps;
  Trainer whole_trainer(*backend, whole, recording(whole_steps));
  whole_trainer.run();
  Trainer split_trainer(*backend, split, recording(split_steps));
  split_trainer.run();

  for (size_t i = 0; i < whole_steps.steps.size(); ++i) {
    EXPECT_NEAR(split_steps.steps[i].loss, whole_steps.steps[i].loss, 1e-5) << "step " << i;
    EXPECT_NEAR(split_steps.steps[i].grad_norm, whole_steps.steps[i].grad_norm,
                1e-4 * whole_steps.steps[i].grad_norm)
        << "step " << i;
  }
  const std::vector<float> a = master_of(whole_trainer);
  const std::vector<float> b = master_of(split_trainer);
  float max_diff = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
  EXPECT_LT(max_diff, 1e-4f);
}

TEST(TrainerSpecTest, InitFromStartsFromExactlyTheFilesWeights) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kF32, 1, fresh_dir("ckpt"));
  const GptConfig model{spec.model.layers, spec.model.heads, spec.model.dim, spec.model.seq_len,
                        spec.model.vocab};
  std::vector<float> weights(static_cast<size_t>(ParameterLayout(model).numel()));
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] = static_cast<float>(static_cast<int64_t>(i % 997) - 498) / 1024.0f;
  const std::filesystem::path dir = fresh_dir("init");
  std::filesystem::create_directories(dir);
  export_hf_safetensors(dir / "start.safetensors", model, weights, DType::kF32);
  spec.model.init_from = (dir / "start.safetensors").string();

  Trainer trainer(*backend, spec);
  EXPECT_TRUE(same_bits(master_of(trainer), weights));
}

TEST(TrainerSpecTest, RefusesAnInitFromFileOfAnotherShape) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kF32, 1, fresh_dir("ckpt"));
  const GptConfig wider{spec.model.layers, spec.model.heads, 64, spec.model.seq_len,
                        spec.model.vocab};
  const std::filesystem::path dir = fresh_dir("init");
  std::filesystem::create_directories(dir);
  export_hf_safetensors(dir / "wide.safetensors", wider,
                        std::vector<float>(static_cast<size_t>(ParameterLayout(wider).numel())),
                        DType::kF32);
  spec.model.init_from = (dir / "wide.safetensors").string();
  try {
    Trainer trainer(*backend, spec);
    FAIL() << "expected init_from to be refused";
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("model.dim=64"), std::string::npos) << error.what();
  }
}

TEST(TrainerSpecTest, RefusesAnInvalidSpecNamingTheKey) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kF32, 1, fresh_dir("ckpt"));
  spec.model.heads = 3;  // does not divide dim 32
  try {
    Trainer trainer(*backend, spec);
    FAIL() << "expected the spec to be refused";
  } catch (const EngineError& error) {
    EXPECT_NE(std::string(error.what()).find("model.heads"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace mixtrain::train_test
