// Why: AdamW's fp32 state of one rank, and the per-parameter view of it
// that an AdamW step over some of its segments takes, wherever the
// gradients and the working weights are placed (full or partition,
// compute pool or host pool). The engine's own step and the offloaded
// step build their parameter lists here.
#pragma once

#include <span>
#include <vector>

#include "engine/model/parameter_layout.h"
#include "engine/optim/adamw.h"
#include "engine/zero/zero_placement.h"

namespace mixtrain {

struct OptimizerState {
  // fp32, the optimizer partition's numel() elements each.
  Tensor master, adam_m, adam_v;

  // The AdamW parameters of `segments` (of the optimizer partition): master,
  // m and v at each segment's partition offset, its gradient in `grads`
  // and, unless `working` is null (the working weights are the master),
  // where the updated working weights go.
  std::vector<AdamWParam> adamw_params(const ParameterLayout& layout,
                                       std::span<const PartitionSegment> segments,
                                       const PlacedTensor& grads,
                                       const PlacedTensor* working) const;
};

}  // namespace mixtrain
