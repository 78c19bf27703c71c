// Why: the ZeRO stage and the offload flags decide, once, where each of a
// rank's model states lives: the whole padded layout or this rank's
// partition of it, in the compute pool or the host pool. The engine, its
// pieces and the memory estimate the scheduler checks ask this one answer
// instead of testing the stage number.
//
//   stage  working weights   gradients        master + m + v
//   0      full              full             full
//   1      full              full             partition
//   2      full              partition        partition
//   3      partition         partition        partition
//
// offload_optimizer puts master, m and v in the host pool; offload_params
// (stage 3) the weight partition.
#pragma once

#include <cstdint>
#include <utility>

#include "engine/backend/tensor.h"
#include "engine/config/job_spec.h"
#include "engine/zero/zero_partition.h"

namespace mixtrain {

struct ZeroSettings {
  int stage = 0;                   // 0..3
  bool offload_optimizer = false;  // master, m and v in the host pool
  bool offload_params = false;     // stage 3: the weight partition in the host pool
  // Stage 0 all-reduces gradients in buckets of consecutive units of at
  // least this many bytes (the last one smaller); stages 1-3 reduce each
  // unit on its own, as its chunks are the partition.
  int64_t bucket_bytes = 25 << 20;
  // Gradients cross the ranks in fp32 (widened from the grad dtype before
  // each reduction and rounded back once after it) instead of in their own
  // dtype; the same when they are fp32 already.
  bool reduce_in_fp32 = false;
};
// The settings of a job spec's zero section.
ZeroSettings zero_settings(const config::ZeroSpec& zero);

// What a buffer spans: every element of the padded layout, or this rank's
// partition (ZeroPartition's buffer order).
enum class Extent { kFull, kPartition };

struct StatePlacement {
  Extent extent = Extent::kFull;
  MemoryPool pool = MemoryPool::kDevice;
};

struct ZeroPlacement {
  StatePlacement weights;    // working weights, compute dtype
  StatePlacement gradients;  // grad dtype
  StatePlacement optimizer;  // fp32 master weights and AdamW's m and v
  // Stage 0 in fp32 without offload: the working weights are the master
  // weights, one buffer.
  bool weights_are_master = false;

  // Every rank updates only its partition but computes with the full
  // weights, so the update is all-gathered after each step (stages 1, 2).
  bool gathers_updated_weights() const {
    return weights.extent == Extent::kFull && optimizer.extent == Extent::kPartition;
  }
  // Each rank holds only its partition of the weights, so a pass gathers
  // each unit's full weights as it goes (stage 3: UnitGatherer).
  bool gathers_each_unit() const { return weights.extent == Extent::kPartition; }
  // Each rank holds every gradient after reduction, so checks over them
  // need no agreement between ranks (stage 0).
  bool every_rank_sees_every_gradient() const { return optimizer.extent == Extent::kFull; }
};
// The placement of `settings` with `compute` working weights. The stage
// must be in 0..3 (ZeroEngine checks it).
ZeroPlacement zero_placement(const ZeroSettings& settings, DType compute);

// A buffer with its extent: the one place that knows whether a shard or a
// segment sits at its flat offset or at its partition offset.
class PlacedTensor {
 public:
  PlacedTensor() = default;
  PlacedTensor(Tensor tensor, Extent extent) : tensor_(std::move(tensor)), extent_(extent) {}

  const Tensor& tensor() const { return tensor_; }
  Extent extent() const { return extent_; }
  // `shard`'s or `segment`'s elements in this buffer.
  Tensor at(const UnitShard& shard) const {
    return tensor_.view(offset(shard.flat_offset, shard.partition_offset), {shard.numel});
  }
  Tensor at(const PartitionSegment& segment) const {
    return tensor_.view(offset(segment.flat_offset, segment.partition_offset), {segment.numel});
  }

 private:
  int64_t offset(int64_t flat, int64_t partition) const {
    return extent_ == Extent::kFull ? flat : partition;
  }
  Tensor tensor_;
  Extent extent_ = Extent::kFull;
};

}  // namespace mixtrain
