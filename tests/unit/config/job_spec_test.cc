// Why: the JobSpec defaults are a contract (DESIGN.md §4) and the enum
// spellings are what users type; both must not drift silently.
#include "engine/config/job_spec.h"

#include <gtest/gtest.h>

namespace mixtrain::config {
namespace {

TEST(JobSpecDefaults, EqualDesignSection4) {
  const JobSpec spec;
  EXPECT_EQ(spec.name, "");
  EXPECT_EQ(spec.model.arch, ModelArch::kGpt);
  EXPECT_EQ(spec.model.layers, 6);
  EXPECT_EQ(spec.model.heads, 6);
  EXPECT_EQ(spec.model.dim, 384);
  EXPECT_EQ(spec.model.seq_len, 256);
  EXPECT_EQ(spec.model.vocab, 256);
  EXPECT_FALSE(spec.model.init_from.has_value());
  EXPECT_EQ(spec.data.train, "");
  EXPECT_FALSE(spec.data.val.has_value());
  EXPECT_FALSE(spec.data.val_fraction.has_value());
  EXPECT_EQ(spec.data.format, DataFormat::kAuto);
  EXPECT_EQ(spec.train.steps, 2000);
  EXPECT_EQ(spec.train.micro_batch, 8);
  EXPECT_EQ(spec.train.grad_accum, 1);
  EXPECT_DOUBLE_EQ(spec.train.lr, 6.0e-4);
  EXPECT_DOUBLE_EQ(spec.train.min_lr, 6.0e-5);
  EXPECT_EQ(spec.train.warmup_steps, 100);
  EXPECT_DOUBLE_EQ(spec.train.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(spec.train.betas[0], 0.9);
  EXPECT_DOUBLE_EQ(spec.train.betas[1], 0.95);
  EXPECT_DOUBLE_EQ(spec.train.grad_clip, 1.0);
  EXPECT_EQ(spec.train.seed, 1337);
  EXPECT_EQ(spec.train.eval_every, 200);
  EXPECT_EQ(spec.train.eval_batches, 20);
  EXPECT_EQ(spec.precision.compute, DType::kBF16);
  EXPECT_FALSE(spec.precision.loss_scale.has_value());
  EXPECT_DOUBLE_EQ(spec.precision.init_scale, 65536.0);
  EXPECT_DOUBLE_EQ(spec.precision.growth_factor, 2.0);
  EXPECT_DOUBLE_EQ(spec.precision.backoff_factor, 0.5);
  EXPECT_EQ(spec.precision.growth_interval, 2000);
  EXPECT_EQ(spec.precision.hysteresis, 1);
  EXPECT_DOUBLE_EQ(spec.precision.min_scale, 1.0);
  EXPECT_EQ(spec.precision.on_min_scale, OnMinScale::kFail);
  EXPECT_FALSE(spec.precision.tf32);
  EXPECT_EQ(spec.zero.stage, 0);
  EXPECT_EQ(spec.zero.offload_optimizer, OffloadTarget::kNone);
  EXPECT_EQ(spec.zero.offload_params, OffloadTarget::kNone);
  EXPECT_EQ(spec.zero.bucket_mb, 25);
  EXPECT_EQ(spec.resources.workers, 1);
  EXPECT_EQ(spec.resources.backend, BackendChoice::kAuto);
  EXPECT_EQ(spec.checkpoint.every, 500);
  EXPECT_EQ(spec.checkpoint.keep, 3);
  EXPECT_FALSE(spec.checkpoint.dir.has_value());
  EXPECT_EQ(spec.retries.max_restarts, 3);
}

TEST(JobSpecDefaults, LossScaleIsDynamicForFp16AndNoneOtherwise) {
  PrecisionSpec precision;
  EXPECT_EQ(effective_loss_scale(precision), LossScaleMode::kNone);  // bf16
  precision.compute = DType::kF16;
  EXPECT_EQ(effective_loss_scale(precision), LossScaleMode::kDynamic);
  precision.compute = DType::kF32;
  EXPECT_EQ(effective_loss_scale(precision), LossScaleMode::kNone);
  precision.loss_scale = LossScaleMode::kStatic;
  EXPECT_EQ(effective_loss_scale(precision), LossScaleMode::kStatic);
  precision.compute = DType::kF16;
  precision.loss_scale = LossScaleMode::kNone;
  EXPECT_EQ(effective_loss_scale(precision), LossScaleMode::kNone);
}

TEST(JobSpecDefaults, ValFractionIsTenPercentUnlessValFileGiven) {
  DataSpec data;
  EXPECT_DOUBLE_EQ(effective_val_fraction(data), 0.1);
  data.val_fraction = 0.25;
  EXPECT_DOUBLE_EQ(effective_val_fraction(data), 0.25);
  data.val_fraction.reset();
  data.val = "val.txt";
  EXPECT_DOUBLE_EQ(effective_val_fraction(data), 0.0);
}

TEST(JobSpecDefaults, CheckpointDirFollowsName) {
  JobSpec spec;
  spec.name = "shakespeare-char";
  EXPECT_EQ(effective_checkpoint_dir(spec), "./checkpoints/shakespeare-char");
  spec.checkpoint.dir = "/data/ckpt";
  EXPECT_EQ(effective_checkpoint_dir(spec), "/data/ckpt");
}

TEST(JobSpecEnums, NamesRoundTrip) {
  EXPECT_EQ(enum_name(DataFormat::kTokens), "tokens");
  EXPECT_EQ(parse_enum<DataFormat>("text"), DataFormat::kText);
  EXPECT_EQ(parse_enum<LossScaleMode>("dynamic"), LossScaleMode::kDynamic);
  EXPECT_EQ(parse_enum<OnMinScale>("continue"), OnMinScale::kContinue);
  EXPECT_EQ(parse_enum<OffloadTarget>("cpu"), OffloadTarget::kCpu);
  EXPECT_EQ(parse_enum<BackendChoice>("cuda"), BackendChoice::kCuda);
  EXPECT_EQ(parse_enum<ModelArch>("gpt"), ModelArch::kGpt);
  EXPECT_FALSE(parse_enum<BackendChoice>("CUDA").has_value());
  EXPECT_FALSE(parse_enum<LossScaleMode>("").has_value());
  for (const auto& [value, name] : enum_names(LossScaleMode{}))
    EXPECT_EQ(parse_enum<LossScaleMode>(enum_name(value)), value) << name;
  EXPECT_EQ(enum_choices<DataFormat>(), "auto, text, tokens");
}

TEST(JobSpecEnums, ComputeDtypeNames) {
  EXPECT_EQ(parse_compute_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_compute_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_compute_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_compute_dtype("fp8"), DType::kFP8E4M3);
  EXPECT_EQ(parse_compute_dtype("fp8_e5m2"), DType::kFP8E5M2);
  EXPECT_FALSE(parse_compute_dtype("int32").has_value());
  EXPECT_FALSE(parse_compute_dtype("fp64").has_value());
}

}  // namespace
}  // namespace mixtrain::config
