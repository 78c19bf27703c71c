// Why: a well-formed job spec must come through the YAML reader exactly as
// written, with DESIGN.md §4 defaults for every key left out.
#include "jobspec/job_spec_yaml.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mixtrain::jobspec {
namespace {

using config::JobSpec;

std::string describe(const JobSpecResult& result) {
  std::string out;
  for (const JobSpecError& error : result.errors) out += error.to_string() + "\n";
  return out;
}

TEST(ParseJobSpec, MinimalSpecGetsDesignDefaults) {
  const JobSpecResult result =
      parse_job_spec("name: tiny\ndata: {train: builtin:demo}\n", "t.yaml");
  ASSERT_TRUE(result.ok()) << describe(result);
  ASSERT_TRUE(result.spec.has_value());
  JobSpec expected;
  expected.name = "tiny";
  expected.data.train = "builtin:demo";
  EXPECT_EQ(*result.spec, expected);
}

TEST(ParseJobSpec, EveryKeyIsRead) {
  const char* yaml = R"(version: 1
name: full
model: {arch: gpt, layers: 2, heads: 2, dim: 64, seq_len: 32, vocab: 300,
        init_from: start.safetensors}
data: {train: train.bin, val: val.bin, format: tokens}
train:
  steps: 40
  micro_batch: 4
  grad_accum: 2
  lr: 3.0e-4
  min_lr: 3e-5
  warmup_steps: 5
  weight_decay: 0.0
  betas: [0.8, 0.99]
  grad_clip: 0.5
  seed: 7
  eval_every: 10
  eval_batches: 3
  activation_checkpointing: selective
precision:
  compute: fp16
  loss_scale: dynamic
  init_scale: 1024
  growth_factor: 4.0
  backoff_factor: 0.25
  growth_interval: 100
  hysteresis: 2
  min_scale: 0.5
  max_scale: 131072
  on_min_scale: continue
zero: {stage: 3, offload_optimizer: cpu, offload_params: cpu, bucket_mb: 8,
       reduce_dtype: fp32}
resources: {workers: 4, backend: cpu}
scheduling: {priority: 9, preemptible: false}
checkpoint: {every: 20, keep: 1, dir: /tmp/ckpt}
retries: {max_restarts: 0}
)";
  const JobSpecResult result = parse_job_spec(yaml, "full.yaml");
  ASSERT_TRUE(result.ok()) << describe(result);
  JobSpec expected;
  expected.name = "full";
  expected.model = {config::ModelArch::kGpt, 2, 2, 64, 32, 300, "start.safetensors"};
  expected.data = {"train.bin", "val.bin", std::nullopt, config::DataFormat::kTokens};
  expected.train = {40,
                    4,
                    2,
                    3.0e-4,
                    3e-5,
                    5,
                    0.0,
                    {0.8, 0.99},
                    0.5,
                    7,
                    10,
                    3,
                    config::ActivationCheckpointing::kSelective};
  expected.precision = {DType::kF16, config::LossScaleMode::kDynamic, 1024, 4.0, 0.25, 100, 2, 0.5,
                        131072.0,    config::OnMinScale::kContinue};
  expected.zero = {3, config::OffloadTarget::kCpu, config::OffloadTarget::kCpu, 8,
                   config::ReduceDtype::kFp32};
  expected.resources = {4, config::BackendChoice::kCpu};
  expected.scheduling = {9, false};
  expected.checkpoint = {20, 1, "/tmp/ckpt"};
  expected.retries = {0};
  EXPECT_EQ(*result.spec, expected);
}

TEST(ParseJobSpec, Fp8ComputeAndItsSettings) {
  const JobSpecResult result = parse_job_spec(
      "name: n\ndata: {train: builtin:demo}\n"
      "precision:\n  compute: fp8\n  stats_every: 10\n"
      "  fp8: {format: e4m3, scaling: mxfp8, amax_history: 16, amax_compute: most_recent,\n"
      "        margin: 1, skip_first_last: false}\n",
      "t");
  ASSERT_TRUE(result.ok()) << describe(result);
  const config::PrecisionSpec& precision = result.spec->precision;
  EXPECT_TRUE(config::is_fp8_compute(precision));
  EXPECT_EQ(config::compute_dtype_name(precision.compute), "fp8");
  EXPECT_EQ(config::model_dtype(precision), DType::kBF16);
  EXPECT_EQ(precision.stats_every, 10);
  ASSERT_TRUE(precision.fp8.has_value());
  EXPECT_EQ(*precision.fp8,
            (config::Fp8Spec{config::Fp8FormatChoice::kE4M3, config::Fp8Scaling::kMxfp8, 16,
                             config::AmaxCompute::kMostRecent, 1, false}));
  // Without an fp8 section, the defaults: hybrid, delayed, 1024, max, 0, true.
  const JobSpecResult defaults =
      parse_job_spec("name: n\ndata: {train: builtin:demo}\nprecision: {compute: fp8}\n", "t");
  ASSERT_TRUE(defaults.ok()) << describe(defaults);
  EXPECT_EQ(config::effective_fp8(defaults.spec->precision), config::Fp8Spec{});
}

// `auto` (quoted or not) leaves a key to the planner: its flag is set and
// its member keeps the default; an override can open or close one; a rule
// between two keys that one of them being `auto` can keep is not broken.
TEST(ParseJobSpec, AutoKeysAreLeftToThePlanner) {
  const JobSpecResult result = parse_job_spec(
      "name: n\ndata: {train: builtin:demo}\n"
      "zero: {stage: auto, offload_optimizer: \"auto\", offload_params: cpu}\n"
      "train: {activation_checkpointing: auto}\n",
      "t.yaml");
  ASSERT_TRUE(result.ok()) << describe(result);
  const config::AutoKeys expected{true, true, false, true};
  EXPECT_EQ(result.spec->auto_keys, expected);
  EXPECT_EQ(result.spec->zero.stage, 0);
  EXPECT_EQ(result.spec->zero.offload_params, config::OffloadTarget::kCpu);
  EXPECT_EQ(config::auto_key_names(result.spec->auto_keys),
            "zero.stage, zero.offload_optimizer, train.activation_checkpointing");

  JobSpecOptions options;
  options.overrides = {"zero.stage=2", "zero.offload_params=auto"};
  const JobSpecResult overridden = parse_job_spec(
      "name: n\ndata: {train: builtin:demo}\nzero: {stage: auto}\n", "t.yaml", options);
  ASSERT_TRUE(overridden.ok()) << describe(overridden);
  EXPECT_EQ(overridden.spec->auto_keys, (config::AutoKeys{false, false, true, false}));
  EXPECT_EQ(overridden.spec->zero.stage, 2);

  // Written keys that no `auto` can reconcile are still refused.
  const JobSpecResult stuck = parse_job_spec(
      "name: n\ndata: {train: builtin:demo}\n"
      "zero: {stage: 1, offload_optimizer: auto, offload_params: cpu}\n",
      "t.yaml");
  ASSERT_EQ(stuck.errors.size(), 1u) << describe(stuck);
  EXPECT_EQ(stuck.errors[0].to_string(),
            "t.yaml:3: zero.offload_params: cpu offload of parameters needs zero.stage 3, got "
            "stage 1");
  // Only the planner's keys take `auto`.
  const JobSpecResult other =
      parse_job_spec("name: n\ndata: {train: builtin:demo}\nzero: {bucket_mb: auto}\n", "t.yaml");
  ASSERT_EQ(other.errors.size(), 1u) << describe(other);
  EXPECT_EQ(other.errors[0].to_string(),
            "t.yaml:3: zero.bucket_mb: expected a non-negative integer, got 'auto'");
}

TEST(ParseJobSpec, EmptyOptionalValueLeavesKeyUnset) {
  const JobSpecResult result =
      parse_job_spec("name: n\nmodel: {init_from: }\ndata: {train: builtin:demo, val: ~}\n", "t");
  ASSERT_TRUE(result.ok()) << describe(result);
  EXPECT_FALSE(result.spec->model.init_from.has_value());
  EXPECT_FALSE(result.spec->data.val.has_value());
}

TEST(ParseJobSpec, SpecialFloatsParseAndAreThenRejectedByValidation) {
  const JobSpecResult result =
      parse_job_spec("name: n\ndata: {train: builtin:demo}\ntrain: {grad_clip: .inf}\n", "t.yaml");
  ASSERT_EQ(result.errors.size(), 1u) << describe(result);
  EXPECT_EQ(result.errors[0].to_string(),
            "t.yaml:3: train.grad_clip: must be a finite number of at least 0, got inf");
}

TEST(ParseJobSpec, ReportsEveryErrorAtOnce) {
  const char* yaml =
      "name: n\ndata: {train: builtin:demo}\nmodel: {layrs: 2, dim: x}\n"
      "train: {steps: 1.5}\n";
  const JobSpecResult result = parse_job_spec(yaml, "t.yaml");
  EXPECT_FALSE(result.spec.has_value());
  ASSERT_EQ(result.errors.size(), 3u) << describe(result);
  EXPECT_EQ(result.errors[0].to_string(),
            "t.yaml:3: model: unknown key 'layrs' (did you mean 'layers'?)");
  EXPECT_EQ(result.errors[1].key_path, "model.dim");
  EXPECT_EQ(result.errors[2].key_path, "train.steps");
}

TEST(ParseJobSpec, MissingFilesAreReportedAtTheirKeyWhenAsked) {
  const char* yaml = "name: n\ndata:\n  train: no-such-file.txt\n";
  EXPECT_TRUE(parse_job_spec(yaml, "t.yaml").ok());
  JobSpecOptions options;
  options.check_files = true;
  const JobSpecResult result = parse_job_spec(yaml, "t.yaml", options);
  ASSERT_EQ(result.errors.size(), 1u) << describe(result);
  EXPECT_EQ(result.errors[0].location, "t.yaml:3");
  EXPECT_EQ(result.errors[0].key_path, "data.train");
  EXPECT_NE(result.errors[0].message.find("file not found"), std::string::npos);
}

TEST(LoadJobSpecFile, ReadsAFileAndNamesItInErrors) {
  const std::filesystem::path path =
      std::filesystem::path(testing::TempDir()) / "mixtrain_load_job_spec_test.yaml";
  std::ofstream(path) << "name: n\ndata: {train: builtin:demo}\nzero: {stage: 5}\n";
  const JobSpecResult result = load_job_spec_file(path);
  std::filesystem::remove(path);
  ASSERT_EQ(result.errors.size(), 1u) << describe(result);
  EXPECT_EQ(result.errors[0].to_string(),
            path.string() + ":3: zero.stage: must be 0, 1, 2, 3 or auto, got 5");
}

TEST(LoadJobSpecFile, MissingFileIsOneError) {
  const JobSpecResult result = load_job_spec_file("/nonexistent/job.yaml");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].to_string(), "/nonexistent/job.yaml: cannot open the job spec file");
}

}  // namespace
}  // namespace mixtrain::jobspec
