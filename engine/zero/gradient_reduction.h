// Why: how backward's gradients reach the rank that owns them is the part
// of a ZeRO step that differs in kind between the stages, so it is one of
// three small strategies, chosen once from the placement:
//
//   gradients  optimizer  strategy
//   full       full       bucketed all-reduce: released units gather into
//                         buckets of at least bucket_bytes, each summed on
//                         every rank (stage 0)
//   full       partition  reduce-scatter in place: each released unit is
//                         summed into this rank's chunk of the full buffer
//                         (stage 1)
//   partition  partition  reduce-scatter buckets: backward writes a unit
//                         into a bucket taken for it, which is summed into
//                         a chunk and added to the partition (stages 2, 3)
//
// Reductions run while backward goes on, at most two in flight. Stages 0
// and 1 reduce only the step's last micro-batch (the others accumulate in
// the full buffer); stages 2 and 3 reduce every micro-batch, as they keep
// no full buffer to accumulate in. With reduce_in_fp32, 16-bit gradients
// are widened into fp32 buffers before each reduction and the reduced sum
// is rounded back to the grad dtype once (DeepSpeed's
// communication_data_type: fp32): twice the bytes on the wire and no
// per-hop 16-bit rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/parameter_layout.h"
#include "engine/zero/zero_context.h"
#include "engine/zero/zero_placement.h"

namespace mixtrain {

class GradientReduction {
 public:
  virtual ~GradientReduction() = default;
  // Where backward adds `info`'s gradient, valid while its unit is
  // acquired in backward.
  virtual Tensor grad(const ParameterInfo& info) = 0;
  // Backward is about to add into `unit`'s gradients.
  virtual void begin_unit(size_t /*unit*/) {}
  // Backward is done with `unit`; `last_micro_batch` says whether this is
  // the step's last micro-batch.
  virtual void end_unit(size_t unit, bool last_micro_batch) = 0;
  // Waits for every reduction: this rank's owned gradients now hold the
  // sum over ranks.
  virtual void finish() = 0;
};

// The strategy the table above gives `placement`.
enum class ReductionStrategy { kBucketedAllReduce, kInPlaceReduceScatter, kReduceScatterBuckets };
ReductionStrategy reduction_strategy(const ZeroPlacement& placement);

// The buffers (element counts, grad dtype) the reduce-scatter buckets hold
// at their peak, reserved up front (the planner counts the same): the
// embeddings' bucket (filled by the head and by the embedding backward),
// ln_f's, the block being filled and two in flight, and a reduced shard of
// each size.
std::vector<int64_t> reduce_scatter_buffer_sizes(const ParameterLayout& layout,
                                                 const ZeroPartition& partition);

// The strategy for `placement` over `grads` (the engine's gradient buffer,
// placement.gradients.extent), with the settings' bucket size (stage 0)
// and reduction dtype. The context's members and `grads` must outlive it.
std::unique_ptr<GradientReduction> make_gradient_reduction(const ZeroContext& context,
                                                           const ZeroPlacement& placement,
                                                           const PlacedTensor& grads,
                                                           const ZeroSettings& settings);

}  // namespace mixtrain
