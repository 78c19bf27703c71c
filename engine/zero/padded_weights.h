// Why: files and users see the model in the plain layout (Psi values, no
// padding: checkpoints' consolidated form, safetensors, init_from), while
// a ZeRO rank's buffers use the layout padded for its world size. These
// two functions are the only conversion between them.
#pragma once

#include <span>
#include <vector>

#include "engine/model/parameter_layout.h"

namespace mixtrain {

// `plain` (padded.param_count() values in the unpadded layout's order) in
// `padded`'s buffer order, padding zero. Throws EngineError
// (kInvalidArgument) when the size is wrong.
std::vector<float> padded_weights(const ParameterLayout& padded, std::span<const float> plain);

// The inverse: `values` (padded.numel()) without the padding.
std::vector<float> unpadded_weights(const ParameterLayout& padded, std::span<const float> values);

}  // namespace mixtrain
