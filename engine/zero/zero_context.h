// Why: the pieces of the ZeRO engine (the gradient reduction, stage 3's
// gathers, the offloaded optimizer) work on one rank's backend, layout,
// partition and communicator, and order their collectives after the
// compute stream the same way. This is that shared ground.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/model/parameter_layout.h"
#include "engine/zero/zero_partition.h"

namespace mixtrain {

struct ZeroContext {
  Backend& backend;
  const ParameterLayout& layout;
  const ZeroPartition& partition;  // this rank's chunks of every unit
  Communicator* comm;              // null: one rank

  // The event a collective waits for before it touches its buffers: the
  // compute stream's work so far (GPU); null on the CPU, where it is done.
  ReadyEvent inputs_ready() const;
  // Starts gathering every rank's `chunk` (one unit's shard, in either
  // pool) into `out` (the whole unit, device pool); at one rank copies it.
  // Done when the handle is.
  CommHandle all_gather(const Tensor& chunk, const Tensor& out) const;
  // A zeroed flat tensor of `numel` elements.
  Tensor allocate(int64_t numel, DType dtype, MemoryCategory category,
                  MemoryPool pool = MemoryPool::kDevice) const;
  // `info`'s view of its unit's buffer in `per_unit` (one per layout unit,
  // undefined while the unit is not acquired). Throws
  // EngineError(kInternal), naming the parameter and `what` the buffers
  // are, when it is undefined.
  Tensor unit_view(const std::vector<Tensor>& per_unit, const ParameterInfo& info,
                   const char* what) const;
};

}  // namespace mixtrain
