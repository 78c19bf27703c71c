// Why: ZeRO stages 1-3 give each of N ranks an equal contiguous slice of
// every parameter unit (ParameterLayout units padded to a multiple of N),
// FSDP-style: a unit's reduce-scatter hands rank r chunk r, its all-gather
// rebuilds the unit from the chunks, and no collective ever needs uneven
// sizes. A rank's partition buffer is its chunks of all units, in unit
// order. This is the map between the padded flat buffer and a partition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/parameter_layout.h"

namespace mixtrain {

// One rank's chunk of one unit.
struct UnitShard {
  int64_t flat_offset = 0;       // first element in the padded flat buffer
  int64_t partition_offset = 0;  // first element in the partition buffer
  int64_t numel = 0;             // unit.padded_numel / world_size
};

// The elements of one parameter that a rank owns: a run inside one shard.
struct PartitionSegment {
  size_t parameter = 0;          // index in layout.parameters()
  int64_t flat_offset = 0;       // first element in the padded flat buffer
  int64_t partition_offset = 0;  // first element in the partition buffer
  int64_t numel = 0;
};

class ZeroPartition {
 public:
  // The partition of `rank` over a layout whose unit alignment is a
  // multiple of world_size. Throws EngineError(kInvalidArgument) otherwise
  // or unless 0 <= rank < world_size.
  ZeroPartition(const ParameterLayout& layout, int rank, int world_size);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // One shard per layout unit, in unit order.
  const std::vector<UnitShard>& shards() const { return shards_; }
  // Elements of the partition buffer: the sum of the layout's padded unit
  // sizes over world_size.
  int64_t numel() const { return numel_; }
  // The owned elements of every parameter, in buffer order; the padding
  // in the shards belongs to no segment.
  const std::vector<PartitionSegment>& segments() const { return segments_; }

 private:
  int rank_;
  int world_size_;
  std::vector<UnitShard> shards_;
  std::vector<PartitionSegment> segments_;
  int64_t numel_ = 0;
};

}  // namespace mixtrain
