// Why: ZeRO must change where the model state lives, never what training
// computes. The same job (same global batches: micro_batch * ranks fixed)
// runs as one process at stage 0 and as N ranks at every stage and offload
// setting, each a real `mixtrain train --nproc N` over loopback; the final
// consolidated checkpoints must agree (fp32: 1e-6 relative, max-norm), and
// every rank must report the model-state bytes of DESIGN.md §6 and the
// ring's communication volume. Runs at one rank are bit-identical to the
// reference; across ranks the gradient sums are taken in another order,
// and AdamW's normalization turns the last-bit differences of near-zero
// gradients into differences of ~lr * 1e-3 in their updates, so the
// weights agree to 1e-6 in relative L2 norm and 1e-5 in max-norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/common/json.h"
#include "engine/model/parameter_layout.h"
#include "engine/train/trainer_checkpoint_files.h"
#include "test_support/temp_dir.h"
#include "train_process.h"
#include "weight_difference.h"

namespace mixtrain {
namespace {

constexpr int kGlobalBatch = 4;  // windows per step, split over the ranks

struct RunConfig {
  int ranks = 1;
  int stage = 0;
  bool offload_optimizer = false;
  bool offload_params = false;
  const char* compute = "fp32";
  std::string extra;  // more --set overrides
  std::string label;  // tells runs apart whose extra differs

  std::string name() const {
    return std::string(compute) + "_n" + std::to_string(ranks) + "_stage" + std::to_string(stage) +
           (offload_optimizer ? "_offopt" : "") + (offload_params ? "_offparams" : "") + label;
  }
};

class ZeroEquivalence : public testing::Test {
 protected:
  // Trains the job with `config` and returns the final master weights.
  std::vector<float> train(const RunConfig& config, Json* summary = nullptr) {
    const std::filesystem::path dir = temp_.path() / config.name();
    run_train(spec_path(), config.ranks,
              "--set train.micro_batch=" + std::to_string(kGlobalBatch / config.ranks) +
                  " --set zero.stage=" + std::to_string(config.stage) +
                  " --set zero.offload_optimizer=" + (config.offload_optimizer ? "cpu" : "none") +
                  " --set zero.offload_params=" + (config.offload_params ? "cpu" : "none") +
                  " --set precision.compute=" + config.compute + " " + config.extra,
              dir);
    if (summary != nullptr) {
      std::ifstream in(dir / "summary.json");
      *summary = parse_json(std::string((std::istreambuf_iterator<char>(in)), {}));
    }
    return load_checkpoint_weights(dir / "ckpt").master;
  }

  std::filesystem::path spec_path() {
    const std::filesystem::path path = temp_.path() / "job.yaml";
    if (!std::filesystem::exists(path)) {
      std::ofstream(path) << "name: zero-equivalence\n"
                             "model: {layers: 2, heads: 2, dim: 32, seq_len: 16, vocab: 256}\n"
                             "data: {train: \"builtin:demo\", val_fraction: 0.1}\n"
                             "train: {steps: 4, lr: 1.0e-3, min_lr: 1.0e-4, warmup_steps: 1,\n"
                             "        eval_every: 4, eval_batches: 1, grad_clip: 1.0}\n"
                             "checkpoint: {every: 4, keep: 1}\n";
    }
    return path;
  }

  test_support::TempDir temp_;
};

TEST_F(ZeroEquivalence, EveryStageAndOffloadMatchesOneProcessInFp32) {
  const std::vector<float> reference = train(RunConfig{});
  std::vector<RunConfig> configs;
  for (int ranks : {1, 2, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      configs.push_back(RunConfig{ranks, stage});
      if (ranks == 2 && stage > 0) configs.push_back(RunConfig{ranks, stage, true});
    }
  }
  configs.push_back(RunConfig{2, 3, true, true});
  configs.push_back(RunConfig{4, 3, true, true});
  configs.push_back(RunConfig{1, 3, true, true});  // the host-pool AdamW alone changes no bit
  for (const RunConfig& config : configs) {
    if (config.ranks == 1 && config.stage == 0) continue;
    const std::vector<float> weights = train(config);
    ASSERT_EQ(weights.size(), reference.size()) << config.name();
    const Difference diff = difference(weights, reference);
    std::printf("%-28s vs one process: relative L2 %.3g, max-norm %.3g\n", config.name().c_str(),
                diff.l2, diff.max_norm);
    if (config.ranks == 1) {
      EXPECT_EQ(diff.max_norm, 0.0) << config.name() << " should be bit-identical";
    }
    EXPECT_LE(diff.l2, 1e-6) << config.name();
    EXPECT_LE(diff.max_norm, 1e-5) << config.name();
  }
}

// Stage 0 all-reduces gradients in buckets of zero.bucket_mb: with a 3.7 MB
// model and 1 MB buckets the reduction is split in four, and still equals
// one process.
TEST_F(ZeroEquivalence, Stage0BucketsOfBucketMbMatchOneProcess) {
  const std::string wider = "--set model.dim=192 --set model.heads=4";
  const std::vector<float> reference = train(RunConfig{1, 0, false, false, "fp32", wider});
  const std::vector<float> bucketed =
      train(RunConfig{4, 0, false, false, "fp32", wider + " --set zero.bucket_mb=1"});
  ASSERT_EQ(bucketed.size(), reference.size());
  const Difference diff = difference(bucketed, reference);
  std::printf("stage 0, 1 MB buckets, N = 4 vs one process: relative L2 %.3g, max-norm %.3g\n",
              diff.l2, diff.max_norm);
  EXPECT_LE(diff.l2, 1e-6);
  EXPECT_LE(diff.max_norm, 1e-5);
}

// DESIGN.md §6 per rank for 16-bit compute, in bytes, over Psi_p (the
// parameters plus each unit's padding to a multiple of N): params, grads,
// master and optimizer state, and what offload moves to the host pool; and
// the bf16 weights against one process, within bf16's rounding.
TEST_F(ZeroEquivalence, Bf16MemoryAndCommunicationFollowTheZeroFormulas) {
  const GptConfig model{2, 2, 32, 16, 256};
  const std::vector<float> reference = train(RunConfig{1, 0, false, false, "bf16"});
  for (int ranks : {2, 4}) {
    const ParameterLayout layout(model, ranks);
    const int64_t psi = layout.param_count(), psi_p = layout.numel(), shard = psi_p / ranks;
    ASSERT_LE(psi_p - psi, static_cast<int64_t>(layout.units().size()) * (ranks - 1));
    for (int stage = 0; stage <= 3; ++stage) {
      for (bool offload : {false, true}) {
        if (offload && stage == 0) continue;
        const RunConfig config{ranks, stage, offload, offload && stage == 3, "bf16"};
        Json summary;
        const Difference diff = difference(train(config, &summary), reference);
        std::printf("%-28s vs one process: relative L2 %.3g, max-norm %.3g\n",
                    config.name().c_str(), diff.l2, diff.max_norm);
        // bf16 gradients are summed across ranks with a rounding to bf16
        // (8 significant bits) per ring hop, which one process never does:
        // measured 5-6e-4 relative L2 and about 2e-3 max-norm after 4 steps.
        EXPECT_LE(diff.l2, 2e-3) << config.name();
        EXPECT_LE(diff.max_norm, 1e-2) << config.name();
        const int64_t params = 2 * (stage == 3 ? shard : psi_p);
        const int64_t grads = 2 * (stage >= 2 ? shard : psi_p);
        const int64_t master = 4 * (stage >= 1 ? shard : psi_p);
        const int64_t moments = 8 * (stage >= 1 ? shard : psi_p);
        const int64_t ring = (stage == 3 ? 3 : 2) * psi_p * (ranks - 1) / ranks;
        const Json& rank_list = summary.at("ranks");
        ASSERT_EQ(rank_list.size(), static_cast<size_t>(ranks)) << config.name();
        for (size_t r = 0; r < rank_list.size(); ++r) {
          const Json& rank = rank_list[r];
          const Json& device = rank.at("memory_bytes").at("device");
          const Json& host = rank.at("memory_bytes").at("host");
          const std::string where = config.name() + " rank " + std::to_string(r);
          const bool params_on_host = config.offload_params;
          EXPECT_EQ(device.at("params").get<int64_t>(), params_on_host ? 0 : params) << where;
          EXPECT_EQ(host.at("params").get<int64_t>(), params_on_host ? params : 0) << where;
          EXPECT_EQ(device.at("grads").get<int64_t>(), grads) << where;
          EXPECT_EQ(device.at("master_params").get<int64_t>(), offload ? 0 : master) << where;
          EXPECT_EQ(device.at("optimizer_state").get<int64_t>(), offload ? 0 : moments) << where;
          EXPECT_EQ(host.at("master_params").get<int64_t>(), offload ? master : 0) << where;
          EXPECT_EQ(host.at("optimizer_state").get<int64_t>(), offload ? moments : 0) << where;
          // Beyond the ring volume: the loss (all stages) and, when the
          // gradients are partitioned, the overflow flag and the squared
          // norm: 1-element all-reduces sending at most 2 elements each.
          const int64_t sent = rank.at("comm_elements_per_step").get<int64_t>();
          EXPECT_GE(sent, ring) << where;
          EXPECT_LE(sent, ring + (stage == 0 ? 2 : 6)) << where;
        }
      }
    }
  }
}

// zero.reduce_dtype: fp32 (DeepSpeed's communication_data_type): bf16
// gradients cross the ranks widened to fp32 and are rounded back to bf16
// once. The ring sends the same elements, those of the gradient
// reductions at 4 bytes instead of 2, and the weights stay within bf16's
// rounding of one process's. Which of the two reductions ends nearer it
// is not asserted: after a few steps the bf16 compute kernels (AVX2 or
// AVX-512 BF16) decide that, not the reduction (issue 29); the reduced
// gradients themselves are checked against the exact sum in
// tests/unit/zero/gradient_reduction_test.cc.
TEST_F(ZeroEquivalence, Bf16GradientsReducedInFp32SendTwiceTheBytes) {
  const GptConfig model{2, 2, 32, 16, 256};
  const std::vector<float> reference = train(RunConfig{1, 0, false, false, "bf16"});
  const int ranks = 4;
  const int64_t psi_p = ParameterLayout(model, ranks).numel();
  for (int stage = 0; stage <= 3; ++stage) {
    Json in_bf16, in_fp32;
    const Difference bf16_diff =
        difference(train(RunConfig{ranks, stage, false, false, "bf16"}, &in_bf16), reference);
    const Difference fp32_diff =
        difference(train(RunConfig{ranks, stage, false, false, "bf16",
                                   "--set zero.reduce_dtype=fp32", "_reduce_fp32"},
                         &in_fp32),
                   reference);
    std::printf(
        "bf16 N = 4 stage %d vs one process: relative L2 %.3g reduced in bf16, %.3g "
        "in fp32\n",
        stage, bf16_diff.l2, fp32_diff.l2);
    EXPECT_LE(fp32_diff.l2, 2e-3) << "stage " << stage;
    EXPECT_LE(fp32_diff.max_norm, 1e-2) << "stage " << stage;
    // Stage 0 all-reduces the gradients (2 Psi_p (N-1)/N elements), the
    // others reduce-scatter them (Psi_p (N-1)/N).
    const int64_t gradient_elements = (stage == 0 ? 2 : 1) * psi_p * (ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const Json& narrow = in_bf16.at("ranks")[r];
      const Json& wide = in_fp32.at("ranks")[r];
      EXPECT_EQ(wide.at("comm_elements_per_step"), narrow.at("comm_elements_per_step"));
      EXPECT_EQ(wide.at("comm_bytes_per_step").get<int64_t>() -
                    narrow.at("comm_bytes_per_step").get<int64_t>(),
                2 * gradient_elements)
          << "stage " << stage << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace mixtrain
