// Why: the placement of each model state is the one answer the ZeRO
// engine and the memory planner both ask; these tests hold it to the ZeRO
// paper's table for every stage and offload (the per-rank formulas are
// held in tests/unit/plan), so a change there cannot move one without the
// other.
#include "engine/zero/zero_placement.h"

#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/backend.h"

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

}  // namespace
}  // namespace mixtrain
