// Why: stage 3 gathers every unit's weights, and stages 2 and 3 give
// backward a gradient bucket and a reduced shard per unit, every step.
// Allocated afresh each time, that is an allocation and a free per unit per
// step; these buffers are kept for the run instead and handed out again,
// one list per size (the units share few sizes: the embeddings, ln_f and
// the blocks), so what is held is what one step needed at its peak, and
// the tracker counts it as held.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/backend/backend.h"

namespace mixtrain {

class ReusedBuffers {
 public:
  // Buffers of `dtype` on `backend`'s device pool, counted as `category`.
  // The backend must outlive this.
  ReusedBuffers(Backend& backend, DType dtype, MemoryCategory category);

  // Allocates a buffer of each of `sizes` (element counts) now, for later
  // takes: what a step holds at its peak, so that it is held from the start
  // and counted as its owner's size function says (the planner reads the
  // same function).
  void reserve(const std::vector<int64_t>& sizes);
  // A flat buffer of `numel` elements, contents undefined: one given back
  // earlier or reserved, or a new one.
  Tensor take(int64_t numel);
  // Keeps `buffer` (from take) for a later take. Work already enqueued may
  // still use it; whoever takes it next is ordered after that work by the
  // compute stream (ops) or by a ReadyEvent (collectives).
  void give_back(Tensor buffer);

 private:
  Backend& backend_;
  const DType dtype_;
  const MemoryCategory category_;
  std::unordered_map<int64_t, std::vector<Tensor>> spare_;  // by numel
};

}  // namespace mixtrain
