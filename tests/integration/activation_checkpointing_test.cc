// Why: activation checkpointing must change only the activation memory of
// a training run, never its weights: with every compute dtype, ZeRO stage,
// offload and gradient accumulation, real `mixtrain train --nproc N` runs
// with selective and blocks checkpointing must end with the final master
// weights of the same run keeping everything, bit for bit (the recompute
// runs the forward's ops on the forward's inputs, and the ranks reduce the
// same gradients in the same order) and the telemetry of the same run (the
// recompute counts nothing twice: gradient ranges, fp8 activation values
// and saturations, taken every step), and the summary must show the
// activations' peak falling from none to selective to blocks.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "engine/common/json.h"
#include "engine/train/trainer_checkpoint_files.h"
#include "test_support/temp_dir.h"
#include "train_process.h"

namespace mixtrain {
namespace {

struct RunConfig {
  const char* label;
  int ranks;
  std::string args;  // --set overrides beyond the spec

  friend void PrintTo(const RunConfig& config, std::ostream* out) { *out << config.label; }
};

constexpr const char* kModes[] = {"none", "selective", "blocks"};

class ActivationCheckpointingRuns : public testing::TestWithParam<RunConfig> {
 protected:
  std::filesystem::path spec_path() {
    const std::filesystem::path path = temp_.path() / "job.yaml";
    std::ofstream(path) << "name: activation-checkpointing\n"
                           "model: {layers: 3, heads: 2, dim: 32, seq_len: 16, vocab: 256}\n"
                           "data: {train: \"builtin:demo\", val_fraction: 0.1}\n"
                           "train: {steps: 3, micro_batch: 2, lr: 1.0e-3, min_lr: 1.0e-4,\n"
                           "        warmup_steps: 1, eval_every: 3, eval_batches: 1}\n"
                           "precision: {stats_every: 1}\n"
                           "checkpoint: {every: 3, keep: 1}\n";
    return path;
  }

  test_support::TempDir temp_;
};

TEST_P(ActivationCheckpointingRuns, EndWithTheWeightsOfKeepingEverything) {
  const RunConfig& config = GetParam();
  const std::filesystem::path spec = spec_path();
  std::vector<float> reference;
  std::vector<Json> reference_telemetry;  // per rank
  int64_t previous_activations = 0;
  for (const char* mode : kModes) {
    const std::filesystem::path dir = temp_.path() / mode;
    ASSERT_TRUE(run_train(spec, config.ranks,
                          config.args + " --set train.activation_checkpointing=" + mode, dir));
    const std::vector<float> weights = load_checkpoint_weights(dir / "ckpt").master;
    std::ifstream in(dir / "summary.json");
    const Json summary = parse_json(std::string(std::istreambuf_iterator<char>(in), {}));
    const int64_t activations =
        summary.at("ranks")[0].at("memory_bytes").at("device").at("activations").get<int64_t>();
    std::printf("%s %s: activations peak %lld bytes\n", config.label, mode,
                static_cast<long long>(activations));
    std::vector<Json> telemetry;
    for (const Json& rank : summary.at("ranks")) {
      Json figures = Json::object();
      for (const char* key : {"gradient_range", "fp8_saturated"})
        if (rank.contains(key)) figures[key] = rank.at(key);
      telemetry.push_back(figures);
    }
    if (reference.empty()) {
      reference = weights;
      reference_telemetry = telemetry;
      ASSERT_TRUE(reference_telemetry[0].contains("gradient_range"));
    } else {
      EXPECT_EQ(telemetry, reference_telemetry) << config.label << ": " << mode;
      ASSERT_EQ(weights.size(), reference.size()) << mode;
      EXPECT_TRUE(weights == reference)
          << config.label << ": " << mode << " changed the final weights";
      EXPECT_LT(activations, previous_activations) << config.label << ": " << mode;
    }
    previous_activations = activations;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryPrecisionStageAndOffload, ActivationCheckpointingRuns,
    testing::Values(
        RunConfig{"fp32_n1_stage0_accum2", 1,
                  "--set precision.compute=fp32 --set train.grad_accum=2"},
        RunConfig{"bf16_n2_stage1_offload", 2,
                  "--set precision.compute=bf16 --set zero.stage=1 "
                  "--set zero.offload_optimizer=cpu"},
        RunConfig{"fp16_n2_stage2", 2, "--set precision.compute=fp16 --set zero.stage=2"},
        RunConfig{"bf16_n2_stage3_offload_accum2", 2,
                  "--set precision.compute=bf16 --set zero.stage=3 --set train.grad_accum=2 "
                  "--set zero.offload_optimizer=cpu --set zero.offload_params=cpu"},
        RunConfig{"fp8_delayed_n1", 1, "--set precision.compute=fp8"},
        RunConfig{"fp8_current_n2_stage3", 2,
                  "--set precision.compute=fp8 --set 'precision.fp8={scaling: current}' "
                  "--set zero.stage=3"},
        RunConfig{"fp8_mxfp8_n1_stage2", 1,
                  "--set precision.compute=fp8 --set 'precision.fp8={scaling: mxfp8}' "
                  "--set zero.stage=2"}),
    [](const testing::TestParamInfo<RunConfig>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace mixtrain
