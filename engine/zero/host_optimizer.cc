// Why: see host_optimizer.h.
#include "engine/zero/host_optimizer.h"

#include <span>

#include "engine/backend/cpu/cpu_backend.h"

namespace mixtrain {

HostOptimizer::HostOptimizer(const ZeroContext& context, const ZeroPartition& optimizer_partition,
                             const OptimizerState& state, DType grad_dtype, DType compute_dtype)
    : context_(context),
      partition_(optimizer_partition),
      state_(state),
      cpu_(std::make_unique<CpuBackend>()),
      host_grads_(context.allocate(partition_.numel(), grad_dtype, MemoryCategory::kCommBuffers,
                                   MemoryPool::kHost),
                  Extent::kPartition),
      host_weights_(context.allocate(partition_.numel(), compute_dtype,
                                     MemoryCategory::kCommBuffers, MemoryPool::kHost),
                    Extent::kPartition) {
  const std::vector<PartitionSegment>& segments = partition_.segments();
  size_t first = 0;
  for (const UnitShard& shard : partition_.shards()) {
    size_t end = first;
    while (end < segments.size() &&
           segments[end].partition_offset < shard.partition_offset + shard.numel)
      ++end;
    unit_segments_.emplace_back(first, end);
    first = end;
  }
}

void HostOptimizer::step(const AdamWConfig& config, const PlacedTensor& grads,
                         const PlacedTensor& weights) {
  // Each unit's owned gradients go to the host on the transfer stream once
  // backward's work is done; the CPU updates unit u while unit u+1's
  // gradients and unit u-1's weights are on the way.
  Backend& backend = context_.backend;
  const std::unique_ptr<Event> backward_done = backend.record_event(StreamKind::kCompute);
  backend.wait_event(StreamKind::kTransfer, *backward_done);
  const std::vector<UnitShard>& shards = partition_.shards();
  std::vector<std::unique_ptr<Event>> arrived;
  for (const UnitShard& shard : shards) {
    backend.copy(host_grads_.at(shard), grads.at(shard), StreamKind::kTransfer);
    arrived.push_back(backend.record_event(StreamKind::kTransfer));
  }
  const std::span<const PartitionSegment> segments = partition_.segments();
  for (size_t u = 0; u < shards.size(); ++u) {
    arrived[u]->wait();
    const auto [first, end] = unit_segments_[u];
    adamw_step(*cpu_,
               state_.adamw_params(context_.layout, segments.subspan(first, end - first),
                                   host_grads_, &host_weights_),
               config);
    backend.copy(weights.at(shards[u]), host_weights_.at(shards[u]), StreamKind::kTransfer);
  }
  const std::unique_ptr<Event> weights_back = backend.record_event(StreamKind::kTransfer);
  backend.wait_event(StreamKind::kCompute, *weights_back);
}

void HostOptimizer::refresh(const PlacedTensor& weights) {
  cpu_->cast(host_weights_.tensor(), state_.master);
  for (const UnitShard& shard : partition_.shards())
    context_.backend.copy(weights.at(shard), host_weights_.at(shard));
}

}  // namespace mixtrain
