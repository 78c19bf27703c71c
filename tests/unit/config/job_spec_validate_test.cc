// Why: validate() is the last line before a job burns hours on an
// impossible setting; each rule gets a case that must trip it, with the
// key path a user will search for.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "engine/config/job_spec.h"

namespace mixtrain::config {
namespace {

JobSpec runnable_spec() {
  JobSpec spec;
  spec.name = "unit";
  spec.data.train = std::string(kBuiltinDemoData);
  return spec;
}

std::string describe(const std::vector<SpecError>& errors) {
  std::string out;
  for (const SpecError& error : errors) out += error.key_path + ": " + error.message + "\n";
  return out;
}

TEST(Validate, DefaultsWithNameAndDataAreRunnable) {
  EXPECT_TRUE(validate(runnable_spec()).empty()) << describe(validate(runnable_spec()));
}

TEST(Validate, RejectsEmptySpecNamingNameAndTrainData) {
  const std::vector<SpecError> errors = validate(JobSpec{});
  ASSERT_EQ(errors.size(), 2u) << describe(errors);
  EXPECT_EQ(errors[0].key_path, "name");
  EXPECT_EQ(errors[1].key_path, "data.train");
}

struct ImpossibleCase {
  const char* label;
  std::function<void(JobSpec&)> mutate;
  const char* key_path;
  const char* message_part;
};

class ValidateImpossible : public testing::TestWithParam<ImpossibleCase> {};

TEST_P(ValidateImpossible, IsRejectedWithKeyAndReason) {
  JobSpec spec = runnable_spec();
  GetParam().mutate(spec);
  const std::vector<SpecError> errors = validate(spec);
  ASSERT_EQ(errors.size(), 1u) << describe(errors);
  EXPECT_EQ(errors[0].key_path, GetParam().key_path);
  EXPECT_NE(errors[0].message.find(GetParam().message_part), std::string::npos)
      << errors[0].message;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Compute fp8 with precision.fp8 written, for the cases of its keys.
config::Fp8Spec& with_fp8(JobSpec& s) {
  s.precision.compute = DType::kFP8E4M3;
  s.precision.fp8 = config::Fp8Spec{};
  return *s.precision.fp8;
}

INSTANTIATE_TEST_SUITE_P(
    ImpossibleValues, ValidateImpossible,
    testing::Values(
        ImpossibleCase{"name_slash", [](JobSpec& s) { s.name = "a/b"; }, "name", "got \"a/b\""},
        ImpossibleCase{"name_dot", [](JobSpec& s) { s.name = ".."; }, "name", "not starting with"},
        ImpossibleCase{"layers", [](JobSpec& s) { s.model.layers = 0; }, "model.layers",
                       "must be at least 1, got 0"},
        ImpossibleCase{"heads_divide", [](JobSpec& s) { s.model.heads = 5; }, "model.heads",
                       "must divide model.dim (384), got 5"},
        ImpossibleCase{"dim", [](JobSpec& s) { s.model.dim = -4; }, "model.dim", "got -4"},
        ImpossibleCase{"seq_len", [](JobSpec& s) { s.model.seq_len = 0; }, "model.seq_len",
                       "at least 1"},
        ImpossibleCase{"vocab_text",
                       [](JobSpec& s) {
                         s.model.vocab = 100;
                         s.data.format = DataFormat::kText;
                       },
                       "model.vocab", "at least 256 for data.format text"},
        ImpossibleCase{"vocab_uint16", [](JobSpec& s) { s.model.vocab = 65537; }, "model.vocab",
                       "at most 65536"},
        ImpossibleCase{"model_too_big", [](JobSpec& s) { s.model.dim = 3999999996; }, "model.dim",
                       "at most 65536, got 3999999996"},
        ImpossibleCase{"init_from_empty", [](JobSpec& s) { s.model.init_from = ""; },
                       "model.init_from", "empty"},
        ImpossibleCase{"unknown_builtin", [](JobSpec& s) { s.data.train = "builtin:wiki"; },
                       "data.train", "unknown builtin dataset"},
        ImpossibleCase{"val_and_fraction",
                       [](JobSpec& s) {
                         s.data.val = "v.txt";
                         s.data.val_fraction = 0.2;
                       },
                       "data.val_fraction", "not both"},
        ImpossibleCase{"val_fraction_one", [](JobSpec& s) { s.data.val_fraction = 1.0; },
                       "data.val_fraction", "must be in (0, 1), got 1"},
        ImpossibleCase{"val_fraction_zero", [](JobSpec& s) { s.data.val_fraction = 0.0; },
                       "data.val_fraction", "(0, 1)"},
        ImpossibleCase{"steps", [](JobSpec& s) { s.train.steps = 0; }, "train.steps", "at least 1"},
        ImpossibleCase{"micro_batch", [](JobSpec& s) { s.train.micro_batch = 0; },
                       "train.micro_batch", "at least 1"},
        ImpossibleCase{"grad_accum", [](JobSpec& s) { s.train.grad_accum = 0; }, "train.grad_accum",
                       "at least 1"},
        ImpossibleCase{"lr_below_min", [](JobSpec& s) { s.train.lr = 1e-5; }, "train.lr",
                       "at least train.min_lr"},
        ImpossibleCase{"lr_nan", [](JobSpec& s) { s.train.lr = kNaN; }, "train.lr", "finite"},
        ImpossibleCase{"min_lr_negative", [](JobSpec& s) { s.train.min_lr = -1e-4; },
                       "train.min_lr", "at least 0"},
        ImpossibleCase{"warmup_equals_steps", [](JobSpec& s) { s.train.warmup_steps = 2000; },
                       "train.warmup_steps", "less than train.steps (2000)"},
        ImpossibleCase{"beta_one", [](JobSpec& s) { s.train.betas[1] = 1.0; }, "train.betas",
                       "[0, 1)"},
        ImpossibleCase{"beta_negative", [](JobSpec& s) { s.train.betas[0] = -0.1; }, "train.betas",
                       "got -0.1"},
        ImpossibleCase{"weight_decay", [](JobSpec& s) { s.train.weight_decay = -0.5; },
                       "train.weight_decay", "at least 0"},
        ImpossibleCase{"grad_clip_inf", [](JobSpec& s) { s.train.grad_clip = kInf; },
                       "train.grad_clip", "finite"},
        ImpossibleCase{"eval_every_zero", [](JobSpec& s) { s.train.eval_every = 0; },
                       "train.eval_every", "when train.eval_batches is above 0"},
        ImpossibleCase{"fp8_e5m2", [](JobSpec& s) { s.precision.compute = DType::kFP8E5M2; },
                       "precision.compute", "write compute: fp8 and choose the formats"},
        ImpossibleCase{"int32_compute", [](JobSpec& s) { s.precision.compute = DType::kI32; },
                       "precision.compute", "must be fp32, fp16, bf16 or fp8"},
        ImpossibleCase{"fp8_keys_without_fp8",
                       [](JobSpec& s) { s.precision.fp8 = config::Fp8Spec{}; }, "precision.fp8",
                       "needs precision.compute: fp8, got bf16"},
        ImpossibleCase{"amax_history_zero", [](JobSpec& s) { with_fp8(s).amax_history = 0; },
                       "precision.fp8.amax_history", "at least 1"},
        ImpossibleCase{"margin_huge", [](JobSpec& s) { with_fp8(s).margin = 1000; },
                       "precision.fp8.margin", "at most 64"},
        ImpossibleCase{"stats_every_huge",
                       [](JobSpec& s) { s.precision.stats_every = int64_t{1} << 40; },
                       "precision.stats_every", "at most"},
        ImpossibleCase{"growth_one", [](JobSpec& s) { s.precision.growth_factor = 1.0; },
                       "precision.growth_factor", "greater than 1"},
        ImpossibleCase{"backoff_one", [](JobSpec& s) { s.precision.backoff_factor = 1.0; },
                       "precision.backoff_factor", "(0, 1)"},
        ImpossibleCase{"interval", [](JobSpec& s) { s.precision.growth_interval = 0; },
                       "precision.growth_interval", "at least 1"},
        ImpossibleCase{"hysteresis", [](JobSpec& s) { s.precision.hysteresis = 0; },
                       "precision.hysteresis", "at least 1"},
        ImpossibleCase{"tf32_bf16", [](JobSpec& s) { s.precision.tf32 = true; }, "precision.tf32",
                       "applies to fp32 compute only, got compute bf16"},
        ImpossibleCase{"min_scale_zero", [](JobSpec& s) { s.precision.min_scale = 0.0; },
                       "precision.min_scale", "greater than 0"},
        ImpossibleCase{"init_below_min", [](JobSpec& s) { s.precision.init_scale = 0.5; },
                       "precision.init_scale", "at least precision.min_scale (1)"},
        ImpossibleCase{"max_scale_not_dynamic",
                       [](JobSpec& s) { s.precision.max_scale = 131072.0; }, "precision.max_scale",
                       "needs loss_scale: dynamic"},
        ImpossibleCase{"max_below_init",
                       [](JobSpec& s) {
                         s.precision.loss_scale = LossScaleMode::kDynamic;
                         s.precision.max_scale = 1024.0;
                       },
                       "precision.max_scale", "at least precision.init_scale (65536), got 1024"},
        ImpossibleCase{"priority_too_high", [](JobSpec& s) { s.scheduling.priority = 1001; },
                       "scheduling.priority", "must be at most 1000, got 1001"},
        ImpossibleCase{"stage_four", [](JobSpec& s) { s.zero.stage = 4; }, "zero.stage",
                       "0, 1, 2, 3 or auto, got 4"},
        ImpossibleCase{"offload_opt_stage0",
                       [](JobSpec& s) { s.zero.offload_optimizer = OffloadTarget::kCpu; },
                       "zero.offload_optimizer", "needs zero.stage 1, 2 or 3"},
        ImpossibleCase{"offload_params_stage2",
                       [](JobSpec& s) {
                         s.zero.stage = 2;
                         s.zero.offload_optimizer = OffloadTarget::kCpu;
                         s.zero.offload_params = OffloadTarget::kCpu;
                       },
                       "zero.offload_params", "needs zero.stage 3, got stage 2"},
        ImpossibleCase{"offload_params_alone",
                       [](JobSpec& s) {
                         s.zero.stage = 3;
                         s.zero.offload_params = OffloadTarget::kCpu;
                       },
                       "zero.offload_params", "zero.offload_optimizer cpu as well"},
        ImpossibleCase{"bucket", [](JobSpec& s) { s.zero.bucket_mb = 0; }, "zero.bucket_mb",
                       "at least 1"},
        ImpossibleCase{"workers", [](JobSpec& s) { s.resources.workers = 0; }, "resources.workers",
                       "at least 1"},
        ImpossibleCase{"ckpt_every", [](JobSpec& s) { s.checkpoint.every = 0; }, "checkpoint.every",
                       "at least 1"},
        ImpossibleCase{"ckpt_keep", [](JobSpec& s) { s.checkpoint.keep = 0; }, "checkpoint.keep",
                       "at least 1"},
        ImpossibleCase{"ckpt_dir_empty", [](JobSpec& s) { s.checkpoint.dir = ""; },
                       "checkpoint.dir", "empty"},
        ImpossibleCase{"restarts", [](JobSpec& s) { s.retries.max_restarts = -1; },
                       "retries.max_restarts", "at least 0, got -1"},
        // Issue 13: sizes that were accepted and then failed (or hung) on
        // the worker now have a ceiling, checked at submit.
        ImpossibleCase{"micro_batch_2_62", [](JobSpec& s) { s.train.micro_batch = 1LL << 62; },
                       "train.micro_batch", "at most 65536, got 4611686018427387904"},
        ImpossibleCase{"workers_million", [](JobSpec& s) { s.resources.workers = 1'000'000; },
                       "resources.workers", "at most 1024, got 1000000"},
        ImpossibleCase{"steps_10_12", [](JobSpec& s) { s.train.steps = 1'000'000'000'000; },
                       "train.steps", "at most 1000000000, got 1000000000000"},
        ImpossibleCase{"eval_batches_2_62", [](JobSpec& s) { s.train.eval_batches = 1LL << 62; },
                       "train.eval_batches", "at most 1048576"},
        ImpossibleCase{"seq_len_huge", [](JobSpec& s) { s.model.seq_len = 1 << 30; },
                       "model.seq_len", "at most 131072"},
        ImpossibleCase{"layers_huge", [](JobSpec& s) { s.model.layers = 100'000; }, "model.layers",
                       "at most 1024"},
        ImpossibleCase{"grad_accum_huge", [](JobSpec& s) { s.train.grad_accum = 1LL << 40; },
                       "train.grad_accum", "at most 65536"},
        ImpossibleCase{"keep_huge", [](JobSpec& s) { s.checkpoint.keep = 1LL << 40; },
                       "checkpoint.keep", "at most 10000"},
        ImpossibleCase{"restarts_huge", [](JobSpec& s) { s.retries.max_restarts = 1LL << 40; },
                       "retries.max_restarts", "at most 1000"}),
    [](const testing::TestParamInfo<ImpossibleCase>& info) { return info.param.label; });

TEST(Validate, AcceptsEdgesOfEachRange) {
  JobSpec spec = runnable_spec();
  spec.train.warmup_steps = 0;
  spec.train.lr = spec.train.min_lr = 0.0;
  spec.train.betas = {0.0, 0.999};
  spec.train.grad_clip = 0.0;
  spec.train.weight_decay = 0.0;
  spec.train.eval_batches = 0;
  spec.train.eval_every = 0;  // no evaluation wanted, so no interval needed
  spec.precision.compute = DType::kF16;
  spec.precision.init_scale = spec.precision.min_scale = 1.0;
  spec.zero.stage = 3;
  spec.zero.offload_optimizer = OffloadTarget::kCpu;
  spec.zero.offload_params = OffloadTarget::kCpu;
  spec.retries.max_restarts = 0;
  spec.data.val_fraction = 0.5;
  EXPECT_TRUE(validate(spec).empty()) << describe(validate(spec));
}

TEST(Validate, ReportsEveryProblemNotJustTheFirst) {
  JobSpec spec = runnable_spec();
  spec.model.heads = 5;
  spec.train.steps = 0;
  spec.zero.stage = 7;
  EXPECT_EQ(validate(spec).size(), 3u) << describe(validate(spec));
}

}  // namespace
}  // namespace mixtrain::config
