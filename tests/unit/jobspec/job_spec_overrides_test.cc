// Why: `--set key=value` (DESIGN.md §3) must type each value by its key's
// schema exactly like the YAML document does, win over the document, and
// be blamed by its own text when it is wrong.
#include <gtest/gtest.h>

#include "jobspec/job_spec_yaml.h"

namespace mixtrain::jobspec {
namespace {

constexpr const char* kBase =
    "name: base\ndata: {train: builtin:demo}\ntrain:\n  steps: 300\n  warmup_steps: 10\n";

JobSpecResult parse_with(std::vector<std::string> overrides) {
  JobSpecOptions options;
  options.overrides = std::move(overrides);
  return parse_job_spec(kBase, "t.yaml", options);
}

std::string describe(const JobSpecResult& result) {
  std::string out;
  for (const JobSpecError& error : result.errors) out += error.to_string() + "\n";
  return out;
}

// precision.tf32 is a boolean key, allowed with fp32 compute.
TEST(Overrides, Tf32IsABooleanForFp32Compute) {
  const JobSpecResult result = parse_with({"precision.compute=fp32", "precision.tf32=true"});
  ASSERT_TRUE(result.ok()) << describe(result);
  EXPECT_TRUE(result.spec->precision.tf32);
  EXPECT_FALSE(parse_with({"precision.compute=fp32", "precision.tf32=sometimes"}).ok());
}

TEST(Overrides, AreTypedByTheirKeyAndWinOverTheDocument) {
  const JobSpecResult result = parse_with({"train.steps=50", "precision.compute=fp16",
                                           "zero.stage=2", "train.betas=[0.8, 0.9]", "name=renamed",
                                           "data.val_fraction=0.2", "zero.offload_optimizer=cpu"});
  ASSERT_TRUE(result.ok()) << describe(result);
  const config::JobSpec& spec = *result.spec;
  EXPECT_EQ(spec.train.steps, 50);
  EXPECT_EQ(spec.train.warmup_steps, 10);  // untouched keys keep the document's value
  EXPECT_EQ(spec.precision.compute, DType::kF16);
  EXPECT_EQ(config::effective_loss_scale(spec.precision), config::LossScaleMode::kDynamic);
  EXPECT_EQ(spec.zero.stage, 2);
  EXPECT_EQ(spec.zero.offload_optimizer, config::OffloadTarget::kCpu);
  EXPECT_DOUBLE_EQ(spec.train.betas[0], 0.8);
  EXPECT_DOUBLE_EQ(spec.train.betas[1], 0.9);
  EXPECT_EQ(spec.name, "renamed");
  EXPECT_EQ(spec.data.val_fraction, 0.2);
}

TEST(Overrides, LaterOverrideWins) {
  const JobSpecResult result = parse_with({"train.steps=50", "train.steps=60"});
  ASSERT_TRUE(result.ok()) << describe(result);
  EXPECT_EQ(result.spec->train.steps, 60);
}

TEST(Overrides, EmptyValueClearsAnOptionalKey) {
  JobSpecOptions options;
  options.overrides = {"checkpoint.dir="};
  const JobSpecResult result =
      parse_job_spec(std::string(kBase) + "checkpoint: {dir: /x}\n", "t.yaml", options);
  ASSERT_TRUE(result.ok()) << describe(result);
  EXPECT_FALSE(result.spec->checkpoint.dir.has_value());
}

TEST(Overrides, CanSupplyTheMissingName) {
  JobSpecOptions options;
  options.overrides = {"name=from-cli"};
  const JobSpecResult result = parse_job_spec("data: {train: builtin:demo}\n", "t.yaml", options);
  ASSERT_TRUE(result.ok()) << describe(result);
  EXPECT_EQ(result.spec->name, "from-cli");
}

struct BadOverride {
  const char* label;
  const char* assignment;
  const char* expected;  // the whole error
};

class BadOverrides : public testing::TestWithParam<BadOverride> {};

TEST_P(BadOverrides, AreBlamedOnTheirOwnText) {
  const JobSpecResult result = parse_with({GetParam().assignment});
  ASSERT_EQ(result.errors.size(), 1u) << describe(result);
  EXPECT_EQ(result.errors[0].to_string(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, BadOverrides,
    testing::Values(
        BadOverride{"unknown_section", "trian.steps=5",
                    "--set trian.steps=5: unknown key 'trian' (did you mean 'train'?)"},
        BadOverride{"unknown_key", "train.stpes=5",
                    "--set train.stpes=5: train: unknown key 'stpes' (did you mean 'steps'?)"},
        BadOverride{"no_equals", "train.steps",
                    "--set train.steps: expected key=value, e.g. --set train.steps=50"},
        BadOverride{"whole_section", "zero=2",
                    "--set zero=2: zero: is a section; set one of its keys (stage, "
                    "offload_optimizer, offload_params, bucket_mb, reduce_dtype)"},
        BadOverride{"into_a_value", "name.first=x",
                    "--set name.first=x: name: is a value, not a section"},
        BadOverride{
            "wrong_type", "train.steps=abc",
            "--set train.steps=abc: train.steps: expected a non-negative integer, got 'abc'"},
        BadOverride{
            "float_for_int", "zero.stage=1.5",
            "--set zero.stage=1.5: zero.stage: expected a non-negative integer or auto, got "
            "1.5"},
        BadOverride{"bad_enum", "precision.compute=half",
                    "--set precision.compute=half: precision.compute: expected one of fp32, "
                    "fp16, bf16, fp8, got 'half'"},
        BadOverride{"invalid_yaml", "train.betas=[0.9,",
                    "--set train.betas=[0.9,: train.betas: the value is not valid YAML: end of "
                    "sequence flow not found"},
        BadOverride{"impossible_value", "train.steps=0",
                    "--set train.steps=0: train.steps: must be at least 1, got 0"},
        BadOverride{"validated_after_override", "model.heads=5",
                    "--set model.heads=5: model.heads: must divide model.dim (384), got 5"}),
    [](const testing::TestParamInfo<BadOverride>& info) { return info.param.label; });

}  // namespace
}  // namespace mixtrain::jobspec
