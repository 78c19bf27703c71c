// Why: every way a user can get a job spec wrong must be caught before any
// work starts, with a message that names the file, line and key (DESIGN.md
// §4). One row per mistake; each must produce exactly its own error.
#include <gtest/gtest.h>

#include "jobspec/job_spec_yaml.h"

namespace mixtrain::jobspec {
namespace {

// Lines 1 and 2 of most cases; the mistake follows from line 3.
#define HEAD "name: t\ndata: {train: builtin:demo}\n"

struct MalformedCase {
  const char* label;
  const char* yaml;
  const char* expected;  // a substring of the one error's to_string()
};

class MalformedSpec : public testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedSpec, IsRejectedWithLocationKeyAndReason) {
  const JobSpecResult result = parse_job_spec(GetParam().yaml, "t.yaml");
  EXPECT_FALSE(result.spec.has_value());
  std::string all;
  for (const JobSpecError& error : result.errors) all += error.to_string() + "\n";
  ASSERT_EQ(result.errors.size(), 1u) << all;
  EXPECT_NE(all.find(GetParam().expected), std::string::npos) << all;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, MalformedSpec,
    testing::Values(
        MalformedCase{"syntax_error", "name: t\nmodel: {layers: 2\ndata: x\n",
                      "t.yaml:3: YAML syntax error: end of map flow not found"},
        MalformedCase{"empty_document", "", "t.yaml: the document is empty"},
        MalformedCase{"comments_only", "# nothing yet\n", "t.yaml: the document is empty"},
        MalformedCase{"two_documents", "name: a\n---\nname: b\n",
                      "expected one YAML document, found 2"},
        MalformedCase{"top_level_list", "- name\n- t\n",
                      "t.yaml:1: expected a map of keys (name, version, model"},
        MalformedCase{"unknown_top_key", HEAD "modle: {}\n",
                      "t.yaml:3: unknown key 'modle' (did you mean 'model'?)"},
        MalformedCase{"unknown_nested_key", HEAD "train:\n  microbatch: 4\n",
                      "t.yaml:4: train: unknown key 'microbatch' (did you mean 'micro_batch'?)"},
        MalformedCase{"unknown_key_far_from_any", HEAD "zero:\n  sharding: full\n",
                      "t.yaml:4: zero: unknown key 'sharding' (known keys: stage, "
                      "offload_optimizer, offload_params, bucket_mb, reduce_dtype)"},
        MalformedCase{"string_for_int", HEAD "train:\n  steps: many\n",
                      "t.yaml:4: train.steps: expected a non-negative integer, got 'many'"},
        MalformedCase{"quoted_number", HEAD "train: {steps: \"50\"}\n",
                      "t.yaml:3: train.steps: expected a non-negative integer, got '50'"},
        MalformedCase{"float_for_int", HEAD "model:\n  arch: gpt\n  layers: 2.5\n",
                      "t.yaml:5: model.layers: expected a non-negative integer, got 2.5"},
        MalformedCase{"negative_for_unsigned", HEAD "zero: {stage: -1}\n",
                      "t.yaml:3: zero.stage: expected a non-negative integer or auto, got -1"},
        MalformedCase{"list_for_map", HEAD "model: [4, 4]\n",
                      "t.yaml:3: model: expected a map of keys (arch, layers, heads, dim, "
                      "seq_len, vocab, init_from), got a list"},
        MalformedCase{"empty_section", HEAD "checkpoint:\n",
                      "t.yaml:3: checkpoint: expected a map of keys (every, keep, dir), got "
                      "nothing"},
        MalformedCase{"map_for_number", HEAD "train:\n  lr: {peak: 1}\n",
                      "t.yaml:4: train.lr: expected a number, got a map"},
        MalformedCase{"list_for_string", "name: [a, b]\ndata: {train: builtin:demo}\n",
                      "t.yaml:1: name: expected a string, got a list"},
        MalformedCase{
            "unknown_dtype", HEAD "precision: {compute: fp64}\n",
            "t.yaml:3: precision.compute: expected one of fp32, fp16, bf16, fp8, got 'fp64'"},
        MalformedCase{"unknown_loss_scale", HEAD "precision:\n  loss_scale: auto\n",
                      "t.yaml:4: precision.loss_scale: expected one of dynamic, static, none, "
                      "got 'auto'"},
        MalformedCase{"unknown_checkpointing", HEAD "train: {activation_checkpointing: full}\n",
                      "t.yaml:3: train.activation_checkpointing: expected one of none, "
                      "selective, blocks or auto, got 'full'"},
        MalformedCase{"unknown_backend", HEAD "resources: {backend: rocm}\n",
                      "t.yaml:3: resources.backend: expected one of auto, cpu, cuda, got 'rocm'"},
        MalformedCase{"one_beta", HEAD "train: {betas: [0.9]}\n",
                      "t.yaml:3: train.betas: expected a list of two numbers [beta1, beta2], "
                      "got a list"},
        MalformedCase{"version_two", "version: 2\n" HEAD,
                      "t.yaml:1: version: only version 1 exists, got 2"},
        MalformedCase{"duplicate_key", HEAD "train:\n  steps: 5\n  steps: 6\n",
                      "t.yaml:5: train.steps: duplicate key (first given at t.yaml:4)"},
        MalformedCase{"missing_name", "data: {train: builtin:demo}\n",
                      "t.yaml:1: name: is required"},
        MalformedCase{"missing_train_data", "name: t\ndata:\n  val_fraction: 0.2\n",
                      "t.yaml:2: data.train: is required"},
        MalformedCase{"heads_do_not_divide_dim", HEAD "model:\n  dim: 384\n  heads: 5\n",
                      "t.yaml:5: model.heads: must divide model.dim (384), got 5"},
        MalformedCase{"defaulted_key_points_at_section", HEAD "train:\n  steps: 50\n",
                      "t.yaml:3: train.warmup_steps: must be at least 0 and less than "
                      "train.steps (50), got 100"},
        MalformedCase{"fp8_keys_without_fp8_compute",
                      HEAD "precision:\n  fp8: {scaling: current}\n",
                      "t.yaml:4: precision.fp8: sets how fp8 compute scales; it needs "
                      "precision.compute: fp8, got bf16"},
        MalformedCase{"fp8_unknown_key",
                      HEAD "precision:\n  compute: fp8\n  fp8: {scaling: delayed, histroy: 4}\n",
                      "t.yaml:5: precision.fp8: unknown key \"histroy\" (expected format, "
                      "scaling, amax_history, amax_compute, margin, skip_first_last)"},
        MalformedCase{"fp8_bad_scaling",
                      HEAD "precision:\n  compute: fp8\n  fp8: {scaling: blockwise}\n",
                      "t.yaml:5: precision.fp8: scaling: expected one of delayed, current, "
                      "mxfp8, got 'blockwise'"},
        MalformedCase{"duplicate_section", HEAD "data: {train: x}\n",
                      "t.yaml:3: data: duplicate key (first given at t.yaml:2)"},
        MalformedCase{"val_fraction_too_big", "name: t\ndata: {train: x, val_fraction: 1.5}\n",
                      "t.yaml:2: data.val_fraction: must be in (0, 1), got 1.5"},
        MalformedCase{"lr_below_min_lr", HEAD "train: {lr: 1e-5, min_lr: 1e-4}\n",
                      "t.yaml:3: train.lr: must be a finite number of at least train.min_lr "
                      "(1e-04), got 1e-05"},
        MalformedCase{"offload_params_without_stage3",
                      HEAD "zero:\n  stage: 2\n  offload_optimizer: cpu\n  offload_params: cpu\n",
                      "t.yaml:6: zero.offload_params: cpu offload of parameters needs zero.stage "
                      "3, got stage 2"},
        MalformedCase{"backoff_not_below_one", HEAD "precision: {backoff_factor: 1.5}\n",
                      "t.yaml:3: precision.backoff_factor: must be in (0, 1), got 1.5"},
        MalformedCase{"zero_workers", HEAD "resources:\n  workers: 0\n",
                      "t.yaml:4: resources.workers: must be at least 1, got 0"},
        MalformedCase{"unknown_builtin_data", "name: t\ndata: {train: \"builtin:wiki\"}\n",
                      "t.yaml:2: data.train: unknown builtin dataset \"builtin:wiki\""},
        MalformedCase{"bad_name", "name: my job\ndata: {train: builtin:demo}\n",
                      "t.yaml:1: name: must be at most 100 letters, digits"}),
    [](const testing::TestParamInfo<MalformedCase>& info) { return info.param.label; });

}  // namespace
}  // namespace mixtrain::jobspec
