// Why: see optimizer_state.h.
#include "engine/zero/optimizer_state.h"

namespace mixtrain {

std::vector<AdamWParam> OptimizerState::adamw_params(const ParameterLayout& layout,
                                                     std::span<const PartitionSegment> segments,
                                                     const PlacedTensor& grads,
                                                     const PlacedTensor* working) const {
  std::vector<AdamWParam> params;
  params.reserve(segments.size());
  for (const PartitionSegment& segment : segments) {
    const Shape shape{segment.numel};
    AdamWParam param;
    param.master = master.view(segment.partition_offset, shape);
    param.m = adam_m.view(segment.partition_offset, shape);
    param.v = adam_v.view(segment.partition_offset, shape);
    param.grad = grads.at(segment);
    if (working != nullptr) param.param_out = working->at(segment);
    param.decay = layout.parameters()[segment.parameter].decay;
    params.push_back(std::move(param));
  }
  return params;
}

}  // namespace mixtrain
