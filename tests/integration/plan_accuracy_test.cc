// Why: a memory plan is only worth what it predicts. Real `mixtrain train
// --nproc N` runs over a table of configurations (ZeRO stages 0-3, both
// offloads, every checkpointing mode, 1, 2 and 4 ranks, four compute
// dtypes) report each rank's peak bytes by category in the summary; the
// planner's figures for the same spec must give the model states, the
// activations and the gathered weights to the byte (they follow from the
// shapes alone) and the pools' peaks within 5% (the ZeRO buckets in flight
// and the kernels' workspace depend on timing and on oneDNN). The table printed (predicted and
// measured per category) is what the README quotes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "engine/common/json.h"
#include "engine/plan/memory_plan.h"
#include "jobspec/job_spec_yaml.h"
#include "test_support/temp_dir.h"
#include "train_process.h"

namespace mixtrain {
namespace {

struct PlanCase {
  const char* label;
  int ranks;
  std::vector<std::string> overrides;

  friend void PrintTo(const PlanCase& c, std::ostream* out) { *out << c.label; }
};

constexpr const char* kSpec =
    "name: plan-accuracy\n"
    "model: {layers: 4, heads: 4, dim: 128, seq_len: 64, vocab: 256}\n"
    "data: {train: \"builtin:demo\", val_fraction: 0.1}\n"
    "train: {steps: 2, micro_batch: 4, warmup_steps: 1, eval_every: 2, eval_batches: 1}\n"
    "checkpoint: {every: 2, keep: 1}\n";

class PlanAccuracy : public testing::TestWithParam<PlanCase> {
 protected:
  test_support::TempDir temp_;
};

TEST_P(PlanAccuracy, ModelStatesExactAndPeaksWithinFivePercent) {
  const PlanCase& c = GetParam();
  const std::filesystem::path spec_path = temp_.path() / "job.yaml";
  std::ofstream(spec_path) << kSpec;
  std::string args;
  for (const std::string& o : c.overrides) args += " --set " + o;
  const std::filesystem::path dir = temp_.path() / "run";
  ASSERT_TRUE(run_train(spec_path, c.ranks, args, dir));
  std::ifstream in(dir / "summary.json");
  const Json summary = parse_json(std::string(std::istreambuf_iterator<char>(in), {}));

  jobspec::JobSpecOptions options;
  options.overrides = c.overrides;
  const jobspec::JobSpecResult parsed = jobspec::parse_job_spec(kSpec, "job.yaml", options);
  ASSERT_TRUE(parsed.ok());
  const plan::MemoryPlan plan = plan::plan_memory(*parsed.spec, plan::cpu_target(c.ranks));

  for (const Json& rank : summary.at("ranks")) {
    const std::string where =
        std::string(c.label) + " rank " + std::to_string(rank.at("rank").get<int64_t>());
    for (const MemoryPool pool : {MemoryPool::kDevice, MemoryPool::kHost}) {
      const Json& measured = rank.at("memory_bytes").at(memory_pool_name(pool));
      for (const MemoryCategory category :
           {MemoryCategory::kParams, MemoryCategory::kGrads, MemoryCategory::kMasterParams,
            MemoryCategory::kOptimizerState, MemoryCategory::kActivations,
            MemoryCategory::kGatheredParams}) {
        const char* name = memory_category_name(category);
        if (!measured.contains(name)) continue;
        EXPECT_EQ(plan.at(pool, category), measured.at(name).get<int64_t>())
            << where << " " << memory_pool_name(pool) << " " << name;
      }
      const double peak = static_cast<double>(measured.at("peak").get<int64_t>());
      const double predicted = static_cast<double>(plan.peak(pool));
      EXPECT_LE(std::fabs(predicted - peak), 0.05 * peak)
          << where << " " << memory_pool_name(pool) << " peak: predicted " << predicted
          << ", measured " << peak;
      if (rank.at("rank").get<int64_t>() == 0) {
        std::printf("%-26s %-6s predicted %10.0f measured %10.0f (%+.2f%%)", c.label,
                    memory_pool_name(pool), predicted, peak,
                    peak > 0 ? 100.0 * (predicted - peak) / peak : 0.0);
        if (pool == MemoryPool::kDevice) {
          for (const MemoryCategory category :
               {MemoryCategory::kActivations, MemoryCategory::kGatheredParams,
                MemoryCategory::kCommBuffers, MemoryCategory::kWorkspace}) {
            const char* name = memory_category_name(category);
            std::printf("  %s %lld/%lld", name, static_cast<long long>(plan.at(pool, category)),
                        static_cast<long long>(measured.at(name).get<int64_t>()));
          }
        }
        std::printf("\n");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    StagesOffloadsCheckpointingRanks, PlanAccuracy,
    testing::Values(
        PlanCase{"bf16_n1_stage0", 1, {}},
        PlanCase{"bf16_n1_stage0_selective", 1, {"train.activation_checkpointing=selective"}},
        PlanCase{"bf16_n1_stage0_blocks", 1, {"train.activation_checkpointing=blocks"}},
        PlanCase{"fp32_n1_stage0", 1, {"precision.compute=fp32"}},
        PlanCase{"bf16_n2_stage1", 2, {"zero.stage=1"}},
        PlanCase{"bf16_n2_stage2", 2, {"zero.stage=2"}},
        PlanCase{"bf16_n2_stage3", 2, {"zero.stage=3"}},
        PlanCase{"bf16_n2_stage2_offload", 2, {"zero.stage=2", "zero.offload_optimizer=cpu"}},
        PlanCase{"bf16_n2_stage3_offload_all_blocks",
                 2,
                 {"zero.stage=3", "zero.offload_optimizer=cpu", "zero.offload_params=cpu",
                  "train.activation_checkpointing=blocks"}},
        PlanCase{
            "fp16_n2_stage2_selective",
            2,
            {"precision.compute=fp16", "zero.stage=2", "train.activation_checkpointing=selective"}},
        PlanCase{
            "bf16_n4_stage1_blocks", 4, {"zero.stage=1", "train.activation_checkpointing=blocks"}},
        PlanCase{"bf16_n4_stage3_selective",
                 4,
                 {"zero.stage=3", "train.activation_checkpointing=selective"}},
        PlanCase{"fp32_n4_stage2_accum2",
                 4,
                 {"precision.compute=fp32", "zero.stage=2", "train.grad_accum=2"}},
        PlanCase{"fp8_n1_stage0", 1, {"precision.compute=fp8"}}),
    [](const testing::TestParamInfo<PlanCase>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace mixtrain
