// Why: offload_optimizer keeps master, m and v in the host pool, and AdamW
// then runs on the CPU (the CPU backend's vectorized kernel) whatever the
// compute backend. Each unit's owned gradient chunk is copied to the host
// on the transfer stream, and while the CPU updates one unit the next
// unit's gradients and the previous unit's updated weights travel (on the
// CPU backend the copies are plain memcpys between the pools).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "engine/zero/optimizer_state.h"
#include "engine/zero/zero_context.h"

namespace mixtrain {

class HostOptimizer {
 public:
  // For `state` (host pool) over `optimizer_partition`, with `grad_dtype`
  // gradients and `compute_dtype` working weights. The context's members,
  // the partition and the state's tensors must outlive this.
  HostOptimizer(const ZeroContext& context, const ZeroPartition& optimizer_partition,
                const OptimizerState& state, DType grad_dtype, DType compute_dtype);

  // AdamW on the owned gradients in `grads`, then the owned chunks of
  // `weights` updated, ordered before the compute stream's next work.
  void step(const AdamWConfig& config, const PlacedTensor& grads, const PlacedTensor& weights);
  // The owned chunks of `weights` re-derived from the master weights.
  void refresh(const PlacedTensor& weights);

 private:
  const ZeroContext& context_;
  const ZeroPartition& partition_;
  const OptimizerState& state_;
  std::unique_ptr<Backend> cpu_;  // runs AdamW and the cast on the host pool
  // Partition-order host copies of the owned gradients and of the
  // updated working weights.
  PlacedTensor host_grads_, host_weights_;
  // partition_.segments() index range of each unit's shard.
  std::vector<std::pair<size_t, size_t>> unit_segments_;
};

}  // namespace mixtrain
