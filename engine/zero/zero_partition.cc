// Why: computes the shards and parameter segments of one rank's partition.
#include "engine/zero/zero_partition.h"

#include <algorithm>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

ZeroPartition::ZeroPartition(const ParameterLayout& layout, int rank, int world_size)
    : rank_(rank), world_size_(world_size) {
  MIXTRAIN_CHECK_ARG(world_size >= 1 && rank >= 0 && rank < world_size,
                     "ZeroPartition: rank " + std::to_string(rank) + " is outside world size " +
                         std::to_string(world_size));
  MIXTRAIN_CHECK_ARG(layout.unit_alignment() % world_size == 0,
                     "ZeroPartition: the layout's unit alignment " +
                         std::to_string(layout.unit_alignment()) +
                         " is not a multiple of the world size " + std::to_string(world_size));
  const std::vector<ParameterInfo>& parameters = layout.parameters();
  for (const ParameterUnit& unit : layout.units()) {
    UnitShard shard;
    shard.numel = unit.padded_numel / world_size;
    shard.flat_offset = unit.offset + rank * shard.numel;
    shard.partition_offset = numel_;
    numel_ += shard.numel;
    shards_.push_back(shard);
    const int64_t shard_end = shard.flat_offset + shard.numel;
    for (size_t p = unit.first_parameter; p < unit.end_parameter; ++p) {
      const int64_t begin = std::max(parameters[p].offset, shard.flat_offset);
      const int64_t end = std::min(parameters[p].offset + parameters[p].numel, shard_end);
      if (begin >= end) continue;
      segments_.push_back(PartitionSegment{
          p, begin, shard.partition_offset + (begin - shard.flat_offset), end - begin});
    }
  }
}

}  // namespace mixtrain
