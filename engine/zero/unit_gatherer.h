// Why: stage 3 keeps only this rank's partition of the weights; a pass
// sees a unit's full weights only while it has the unit acquired. This
// all-gathers a unit when the pass acquires it and frees it on release,
// and, when a unit is acquired, starts gathering the unit the pass will
// acquire next, so that gather runs while this unit computes. The gathered
// buffers come from ReusedBuffers, reserved at construction as
// gathered_buffer_sizes says (the planner counts the same).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "engine/model/model_weights.h"
#include "engine/zero/reused_buffers.h"
#include "engine/zero/zero_context.h"

namespace mixtrain {

// The buffers (element counts, compute dtype) a UnitGatherer holds at its
// peak: the embeddings (held for the head), the block in use and the one
// gathered next, and ln_f's.
std::vector<int64_t> gathered_buffer_sizes(const ParameterLayout& layout);

class UnitGatherer {
 public:
  // Gathers from `weights` (this rank's partition, compute dtype, either
  // pool). The context's members must outlive this.
  UnitGatherer(const ZeroContext& context, Tensor weights);
  ~UnitGatherer();
  UnitGatherer(const UnitGatherer&) = delete;
  UnitGatherer& operator=(const UnitGatherer&) = delete;

  // `pass` acquires `unit`: its weights are gathered when this returns.
  void acquire(size_t unit, ModelPass pass);
  void release(size_t unit);
  // `info`'s full weights while its unit is acquired.
  Tensor param(const ParameterInfo& info) const;

 private:
  // The unit a pass acquires after `unit`, or nullopt after its last.
  std::optional<size_t> next_unit(size_t unit, ModelPass pass) const;
  // Starts gathering `unit`'s weights into a reused buffer.
  void start_gather(size_t unit);

  const ZeroContext& context_;
  const Tensor weights_;
  ReusedBuffers buffers_;         // what gathered_ and prefetch_ hold
  std::vector<Tensor> gathered_;  // per unit, while acquired
  struct Prefetch {
    size_t unit;
    Tensor buffer;
    CommHandle handle;
  };
  std::optional<Prefetch> prefetch_;  // the next unit's gather in flight
};

}  // namespace mixtrain
