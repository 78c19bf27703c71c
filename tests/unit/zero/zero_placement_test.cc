// Why: the placement of each model state is the one answer the ZeRO
// engine and the scheduler's memory check both ask; these tests hold it to
// the ZeRO paper's table and per-rank formulas for every stage and
// offload, so a change there cannot move one without the other.
#include "engine/zero/zero_placement.h"

#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"
#include "engine/zero/rank_model_states.h"

namespace mixtrain {
namespace {

TEST(ZeroPlacement, EachStagePartitionsOneMoreStateThanTheLast) {
  const auto at = [](int stage) { return zero_placement(ZeroSettings{stage}, DType::kBF16); };
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const ZeroPlacement p = at(stage);
    EXPECT_EQ(p.optimizer.extent, stage >= 1 ? Extent::kPartition : Extent::kFull);
    EXPECT_EQ(p.gradients.extent, stage >= 2 ? Extent::kPartition : Extent::kFull);
    EXPECT_EQ(p.weights.extent, stage >= 3 ? Extent::kPartition : Extent::kFull);
    for (const StatePlacement& state : {p.optimizer, p.gradients, p.weights})
      EXPECT_EQ(state.pool, MemoryPool::kDevice);
    EXPECT_FALSE(p.weights_are_master);  // bf16 weights are their own buffer
    EXPECT_EQ(p.gathers_updated_weights(), stage == 1 || stage == 2);
    EXPECT_EQ(p.every_rank_sees_every_gradient(), stage == 0);
  }
}

TEST(ZeroPlacement, OffloadMovesOnlyWhatItNames) {
  ZeroSettings settings{3};
  settings.offload_optimizer = true;
  ZeroPlacement p = zero_placement(settings, DType::kF16);
  EXPECT_EQ(p.optimizer.pool, MemoryPool::kHost);
  EXPECT_EQ(p.weights.pool, MemoryPool::kDevice);
  EXPECT_EQ(p.gradients.pool, MemoryPool::kDevice);
  settings.offload_params = true;
  p = zero_placement(settings, DType::kF16);
  EXPECT_EQ(p.weights.pool, MemoryPool::kHost);
  EXPECT_EQ(p.gradients.pool, MemoryPool::kDevice);  // backward writes them on the device
}

TEST(ZeroPlacement, Fp32StageZeroWithoutOffloadComputesOnTheMasterWeights) {
  EXPECT_TRUE(zero_placement(ZeroSettings{0}, DType::kF32).weights_are_master);
  EXPECT_FALSE(zero_placement(ZeroSettings{1}, DType::kF32).weights_are_master);
  ZeroSettings offloaded{0};
  offloaded.offload_optimizer = true;
  EXPECT_FALSE(zero_placement(offloaded, DType::kF32).weights_are_master);
}

TEST(PlacedTensor, AShardSitsAtItsFlatOffsetInFullAndAtItsPartitionOffsetInAPartition) {
  const std::unique_ptr<Backend> cpu = make_backend("cpu");
  const Tensor buffer = cpu->zeros({64}, DType::kF32, MemoryCategory::kGrads);
  const UnitShard shard{.flat_offset = 40, .partition_offset = 8, .numel = 4};
  EXPECT_EQ(PlacedTensor(buffer, Extent::kFull).at(shard).data(), buffer.view(40, {4}).data());
  EXPECT_EQ(PlacedTensor(buffer, Extent::kPartition).at(shard).data(), buffer.view(8, {4}).data());
  const PartitionSegment segment{
      .parameter = 2, .flat_offset = 41, .partition_offset = 9, .numel = 2};
  EXPECT_EQ(PlacedTensor(buffer, Extent::kFull).at(segment).numel(), 2);
  EXPECT_EQ(PlacedTensor(buffer, Extent::kPartition).at(segment).data(),
            buffer.view(9, {2}).data());
}

// The ZeRO paper's per-rank model-state bytes with Psi parameters, N ranks
// and K = 12 (fp32 master, m, v) in mixed precision: stage 0 (2+2+K)Psi,
// stage 1 (2+2)Psi + K Psi/N, stage 2 2Psi + (2+K)Psi/N, stage 3 (2+2+K)Psi/N.
TEST(RankModelStates, FollowTheZeroPaperForEveryStageAndOffload) {
  config::JobSpec spec;
  spec.model.layers = 2;
  spec.model.heads = 2;
  spec.model.dim = 64;
  spec.model.seq_len = 32;
  spec.resources.workers = 4;
  spec.precision.compute = DType::kBF16;
  const double psi = static_cast<double>(ParameterLayout(gpt_config(spec.model)).param_count());
  const double n = 4;
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
  for (const Case& c : cases) {
    SCOPED_TRACE("stage " + std::to_string(c.stage) + " offload " +
                 std::to_string(c.offload_optimizer) + std::to_string(c.offload_params));
    spec.zero.stage = c.stage;
    spec.zero.offload_optimizer =
        c.offload_optimizer ? config::OffloadTarget::kCpu : config::OffloadTarget::kNone;
    spec.zero.offload_params =
        c.offload_params ? config::OffloadTarget::kCpu : config::OffloadTarget::kNone;
    const RankModelStates states = rank_model_states(spec);
    EXPECT_EQ(states.parameters, psi);
    EXPECT_DOUBLE_EQ(states.device, c.device);
    EXPECT_DOUBLE_EQ(states.host, c.host);
  }
}

TEST(RankModelStates, Fp32CountsTheMasterWeightsOnceAsTheParameters) {
  config::JobSpec spec;
  spec.resources.workers = 2;
  spec.precision.compute = DType::kF32;
  spec.zero.stage = 0;
  const double psi = rank_model_states(spec).parameters;
  EXPECT_DOUBLE_EQ(rank_model_states(spec).device, 16 * psi);  // 4 + 4 + 8 (m, v)
  spec.zero.stage = 3;
  EXPECT_DOUBLE_EQ(rank_model_states(spec).device, 16 * psi / 2);
}

}  // namespace
}  // namespace mixtrain
