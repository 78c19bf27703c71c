// Why: the planner's model states must be the ZeRO paper's per-rank
// formulas, over the parameters as the ranks pad them, for every stage
// and offload; an absurd shape must say "too large" rather than wrap
// around; and the alternatives it offers must each be a valid spec that
// fits, cheapest first; and the ZeRO pieces' buffers must be counted by
// the functions the engine reserves them with (issue 32). (plan_accuracy_test
// holds the whole plan to measured runs.)
#include "engine/plan/memory_plan.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <tuple>

#include "engine/backend/backend.h"
#include "engine/backend/device_reserve.h"
#include "engine/common/error.h"
#include "engine/data/token_source.h"
#include "engine/model/gpt.h"
#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"
#include "engine/plan/plan_alternatives.h"
#include "engine/zero/gradient_reduction.h"
#include "engine/zero/unit_gatherer.h"
#include "engine/zero/zero_engine.h"

namespace mixtrain::plan {
namespace {

config::JobSpec small_spec() {
  config::JobSpec spec;
  spec.name = "plan";
  spec.data.train = "builtin:demo";
  spec.model.layers = 2;
  spec.model.heads = 2;
  spec.model.dim = 64;
  spec.model.seq_len = 32;
  spec.train.micro_batch = 2;
  spec.precision.compute = DType::kBF16;
  return spec;
}

// The ZeRO paper's per-rank model-state bytes with Psi parameters (padded
// for N ranks), N = 4 and K = 12 (fp32 master, m, v) in mixed precision:
// stage 0 (2+2+K)Psi, stage 1 (2+2)Psi + K Psi/N, stage 2 2Psi + (2+K)Psi/N,
// stage 3 (2+2+K)Psi/N; offload moves K Psi/N (and 2 Psi/N) to the host.
TEST(MemoryPlan, ModelStatesFollowTheZeroPaperForEveryStageAndOffload) {
  config::JobSpec spec = small_spec();
  const double n = 4;
  const double psi = static_cast<double>(ParameterLayout(gpt_config(spec.model), 4).numel());
  struct Case {
    int64_t stage;
    bool offload_optimizer, offload_params;
    double device, host;
  };
  const Case cases[] = {
      {0, false, false, 16 * psi, 0},
      {1, false, false, 4 * psi + 12 * psi / n, 0},
      {2, false, false, 2 * psi + 14 * psi / n, 0},
      {3, false, false, 16 * psi / n, 0},
      {1, true, false, 4 * psi, 12 * psi / n},
      {2, true, false, 2 * psi + 2 * psi / n, 12 * psi / n},
      {3, true, false, 4 * psi / n, 12 * psi / n},
      {3, true, true, 2 * psi / n, 14 * psi / n},
  };
  PlanTarget target;
  target.world_size = 4;
  for (const Case& c : cases) {
    SCOPED_TRACE("stage " + std::to_string(c.stage) + " offload " +
                 std::to_string(c.offload_optimizer) + std::to_string(c.offload_params));
    spec.zero.stage = c.stage;
    spec.zero.offload_optimizer =
        c.offload_optimizer ? config::OffloadTarget::kCpu : config::OffloadTarget::kNone;
    spec.zero.offload_params =
        c.offload_params ? config::OffloadTarget::kCpu : config::OffloadTarget::kNone;
    const MemoryPlan plan = plan_memory(spec, target);
    for (const MemoryPool pool : {MemoryPool::kDevice, MemoryPool::kHost}) {
      const double states = static_cast<double>(plan.at(pool, MemoryCategory::kParams) +
                                                plan.at(pool, MemoryCategory::kGrads) +
                                                plan.at(pool, MemoryCategory::kMasterParams) +
                                                plan.at(pool, MemoryCategory::kOptimizerState));
      EXPECT_DOUBLE_EQ(states, pool == MemoryPool::kDevice ? c.device : c.host);
    }
  }
}

// Issue 29: `plan` said 3 MiB fit a run that held 2.4 GB of tokens. A
// built-in corpus is held in memory, as host data; a file is mapped.
TEST(MemoryPlan, DataHeldInMemoryIsPlannedOnTheHost) {
  config::JobSpec spec = small_spec();
  const MemoryPlan builtin = plan_memory(spec, cpu_target(1));
  EXPECT_EQ(builtin.at(MemoryPool::kHost, MemoryCategory::kData),
            corpus_bytes_in_memory("builtin:demo"));
  EXPECT_GT(builtin.at(MemoryPool::kHost, MemoryCategory::kData), 300000);
  EXPECT_EQ(builtin.at(MemoryPool::kDevice, MemoryCategory::kData), 0);
  EXPECT_EQ(builtin.peak(MemoryPool::kHost), builtin.at(MemoryPool::kHost, MemoryCategory::kData));
  spec.data.train = "corpus.txt";
  const MemoryPlan mapped = plan_memory(spec, cpu_target(1));
  EXPECT_EQ(mapped.at(MemoryPool::kHost, MemoryCategory::kData), 0);
  EXPECT_EQ(mapped.peak(MemoryPool::kDevice), builtin.peak(MemoryPool::kDevice));
}

TEST(MemoryPlan, Fp32CountsTheMasterWeightsOnceAsTheParameters) {
  config::JobSpec spec = small_spec();
  spec.precision.compute = DType::kF32;
  PlanTarget target;
  target.world_size = 2;
  const int64_t psi = ParameterLayout(gpt_config(spec.model), 2).numel();
  const MemoryPlan stage0 = plan_memory(spec, target);
  EXPECT_EQ(stage0.at(MemoryPool::kDevice, MemoryCategory::kParams), 0);
  EXPECT_EQ(stage0.at(MemoryPool::kDevice, MemoryCategory::kMasterParams), 4 * psi);
  spec.zero.stage = 3;
  const MemoryPlan stage3 = plan_memory(spec, target);
  EXPECT_EQ(stage3.at(MemoryPool::kDevice, MemoryCategory::kParams), 4 * psi / 2);
}

TEST(MemoryPlan, ARankConfigurationIsThePlannedPeakOfTheSpecsWorkers) {
  config::JobSpec spec = small_spec();
  spec.resources.workers = 2;
  spec.zero.stage = 2;
  spec.zero.offload_optimizer = config::OffloadTarget::kCpu;
  PlanTarget target;
  target.world_size = 2;
  target.bf16_gemm_staged = true;
  const MemoryPlan plan = plan_memory(spec, target);
  const std::vector<RankConfiguration> configurations = rank_configurations(spec);
  ASSERT_EQ(configurations.size(), 1u);  // nothing auto: the spec's own
  EXPECT_EQ(configurations[0].choice, choice_of(spec));
  const RankMemory& memory = configurations[0].memory;
  EXPECT_EQ(memory.parameters,
            static_cast<double>(ParameterLayout(gpt_config(spec.model)).param_count()));
  EXPECT_EQ(memory.device, static_cast<double>(plan.peak(MemoryPool::kDevice)));
  EXPECT_EQ(memory.host, static_cast<double>(plan.peak(MemoryPool::kHost)));
  EXPECT_GT(memory.host, 0);
}

// On a GPU the CUDA runtime and NCCL hold memory no category counts: a
// rank needs it beside the pool's peak, a budget of just the peak does not
// fit, and the coordinator asks a worker for both (issue 31).
TEST(MemoryPlan, AGpuRankNeedsTheRuntimesAndNcclsReserveBesideItsPeak) {
  config::JobSpec spec = small_spec();
  spec.resources.workers = 2;
  spec.resources.backend = config::BackendChoice::kCuda;
  PlanTarget target = scheduling_target(spec);
  ASSERT_TRUE(target.cuda);
  const MemoryPlan plan = plan_memory(spec, target);
  EXPECT_EQ(plan.device_runtime, device_reserve(2).total());
  EXPECT_EQ(plan.device_need(), plan.peak(MemoryPool::kDevice) + device_reserve(2).total());
  EXPECT_FALSE(MemoryBudget{.device = plan.peak(MemoryPool::kDevice)}.fits(plan));
  EXPECT_TRUE(MemoryBudget{.device = plan.device_need()}.fits(plan));
  EXPECT_EQ(rank_configurations(spec).front().memory.device,
            static_cast<double>(plan.device_need()));

  target.cuda = false;
  const MemoryPlan on_cpu = plan_memory(spec, target);
  EXPECT_EQ(on_cpu.device_runtime, 0);
  EXPECT_EQ(on_cpu.device_need(), on_cpu.peak(MemoryPool::kDevice));
}

// `auto` keys vary, the written ones stay, every choice is valid and they
// come cheapest first; a spec still `auto` cannot be planned.
TEST(MemoryPlan, AutoKeysOpenOnlyTheirOwnChoices) {
  config::JobSpec spec = small_spec();
  spec.resources.workers = 2;
  spec.auto_keys.zero_stage = true;
  spec.auto_keys.offload_optimizer = true;
  spec.train.activation_checkpointing = config::ActivationCheckpointing::kSelective;
  EXPECT_THROW(plan_memory(spec, scheduling_target(spec)), EngineError);
  const std::vector<RankConfiguration> configurations = rank_configurations(spec);
  // stage 0 without offload, stages 1-3 with and without: 7.
  ASSERT_EQ(configurations.size(), 7u);
  std::set<std::pair<int64_t, config::OffloadTarget>> seen;
  for (const RankConfiguration& c : configurations) {
    EXPECT_EQ(c.choice.checkpointing, config::ActivationCheckpointing::kSelective);
    EXPECT_EQ(c.choice.offload_params, config::OffloadTarget::kNone);
    seen.insert({c.choice.stage, c.choice.offload_optimizer});
  }
  EXPECT_EQ(seen.size(), 7u);
  // Stages 0 and 1 send the least; of the two, stage 1 holds less.
  EXPECT_EQ(configurations.front().choice,
            (PlanChoice{1, config::OffloadTarget::kNone, config::OffloadTarget::kNone,
                        config::ActivationCheckpointing::kSelective}));
  const std::vector<PlanAlternative> all =
      alternatives(spec, scheduling_target(spec), spec.auto_keys);
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_LE(all[i - 1].plan.comm_elements_per_step, all[i].plan.comm_elements_per_step);
  }
}

// What `auto` becomes: the cheapest choice that fits; none when none fits.
TEST(MemoryPlan, ChooseConfigurationTakesTheCheapestThatFits) {
  config::JobSpec spec = small_spec();
  spec.auto_keys.zero_stage = true;
  spec.auto_keys.activation_checkpointing = true;
  PlanTarget target;
  target.world_size = 4;
  const std::vector<PlanAlternative> all = alternatives(spec, target, spec.auto_keys);
  ASSERT_GT(all.size(), 2u);
  const int64_t everything = all.front().plan.peak(MemoryPool::kDevice);
  std::optional<PlanAlternative> chosen =
      choose_configuration(spec, target, MemoryBudget{.device = everything});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(chosen->choice, all.front().choice);
  // Less room: the first of the ranked choices that fits, no cheaper one.
  const MemoryBudget tight{.device = everything - 1};
  chosen = choose_configuration(spec, target, tight);
  ASSERT_TRUE(chosen.has_value());
  EXPECT_LE(chosen->plan.peak(MemoryPool::kDevice), tight.device);
  for (const PlanAlternative& a : all) {
    if (a.choice == chosen->choice) break;
    EXPECT_FALSE(tight.fits(a.plan)) << describe(a.choice);
  }
  EXPECT_EQ(with_choice(spec, chosen->choice).auto_keys, config::AutoKeys{});
  EXPECT_FALSE(choose_configuration(spec, target, MemoryBudget{.device = 1}).has_value());
  EXPECT_EQ(describe_auto(chosen->choice, spec.auto_keys),
            "zero.stage " + std::to_string(chosen->choice.stage) +
                ", train.activation_checkpointing " +
                std::string(config::enum_name(chosen->choice.checkpointing)));
}

TEST(MemoryPlan, SaysTooLargeInsteadOfOverflowing) {
  config::JobSpec spec = small_spec();
  spec.model.layers = 1024;
  spec.model.dim = 65536;
  spec.model.heads = 1024;
  spec.model.seq_len = 131072;
  spec.train.micro_batch = 65536;
  ASSERT_TRUE(config::validate(spec).empty());
  try {
    plan_memory(spec, PlanTarget{});
    FAIL() << "planned an impossible shape";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("too large to plan"), std::string::npos) << e.what();
  }
}

TEST(PlanAlternatives, AreValidFitTheBudgetAndComeCheapestFirst) {
  config::JobSpec spec = small_spec();
  PlanTarget target;
  target.world_size = 4;
  const int64_t everything = plan_memory(spec, target).peak(MemoryPool::kDevice);
  const int64_t budget = everything * 3 / 4;
  const std::vector<PlanAlternative> fitting =
      fitting_alternatives(spec, target, MemoryBudget{.device = budget});
  ASSERT_FALSE(fitting.empty());
  auto cost = [](const PlanAlternative& a) {
    return std::make_tuple(a.plan.comm_elements_per_step, a.plan.recompute_flops_per_step,
                           a.plan.host_traffic_bytes_per_step);
  };
  for (size_t i = 0; i < fitting.size(); ++i) {
    const config::JobSpec chosen = with_choice(spec, fitting[i].choice);
    EXPECT_TRUE(config::validate(chosen).empty()) << describe(fitting[i].choice);
    EXPECT_LE(fitting[i].plan.peak(MemoryPool::kDevice), budget) << describe(fitting[i].choice);
    if (i > 0) EXPECT_LE(cost(fitting[i - 1]), cost(fitting[i]));
  }
  // Stage 0 without checkpointing needs everything: it is not offered.
  for (const PlanAlternative& a : fitting) EXPECT_NE(a.choice, PlanChoice{});
  EXPECT_TRUE(fitting_alternatives(spec, target, MemoryBudget{.device = 1}).empty());
  // On one memory the host pool counts too.
  const MemoryBudget ram{.device = budget, .shared = true};
  for (const PlanAlternative& a : fitting_alternatives(spec, target, ram))
    EXPECT_LE(a.plan.peak(MemoryPool::kDevice) + a.plan.peak(MemoryPool::kHost), budget);
  EXPECT_EQ(describe(PlanChoice{3, config::OffloadTarget::kCpu, config::OffloadTarget::kNone,
                                config::ActivationCheckpointing::kBlocks}),
            "zero.stage 3 + offload_optimizer cpu + activation_checkpointing blocks");
}

// The stage-3 gatherer and the reduce-scatter buckets reserve their
// buffers when the engine is built, sized by gathered_buffer_sizes and
// reduce_scatter_buffer_sizes; the planner counts the same functions, so
// a rank holds exactly the planned bytes of both categories from the start.
TEST(MemoryPlan, CountsTheZeroBuffersTheEngineReserves) {
  for (const int stage : {0, 1, 2, 3}) {
    config::JobSpec spec = small_spec();
    spec.model.layers = 3;  // more blocks than either keeps at once
    spec.zero.stage = stage;
    const MemoryPlan plan = plan_memory(spec, cpu_target(1));
    std::unique_ptr<Backend> backend = make_backend("cpu");
    const Gpt gpt(*backend, gpt_config(spec.model), DType::kBF16, DType::kBF16, 1,
                  config::ActivationCheckpointing::kNone);
    const ZeroEngine engine(*backend, gpt, nullptr, zero_settings(spec.zero));
    const ParameterLayout& layout = gpt.layout();
    int64_t gathered = 0, buckets = 0;
    if (stage == 3)
      for (const int64_t numel : gathered_buffer_sizes(layout)) gathered += 2 * numel;
    if (stage >= 2) {
      for (const int64_t numel : reduce_scatter_buffer_sizes(layout, ZeroPartition(layout, 0, 1)))
        buckets += 2 * numel;
    }
    const MemoryTracker& memory = backend->memory();
    EXPECT_EQ(plan.at(MemoryPool::kDevice, MemoryCategory::kGatheredParams), gathered) << stage;
    EXPECT_EQ(int64_t(memory.current(MemoryPool::kDevice, MemoryCategory::kGatheredParams)),
              gathered)
        << stage;
    EXPECT_EQ(plan.at(MemoryPool::kDevice, MemoryCategory::kCommBuffers), buckets) << stage;
    EXPECT_EQ(int64_t(memory.current(MemoryPool::kDevice, MemoryCategory::kCommBuffers)), buckets)
        << stage;
  }
}

}  // namespace
}  // namespace mixtrain::plan
