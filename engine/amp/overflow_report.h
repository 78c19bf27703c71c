// Why: "overflow, step skipped" alone sends users hunting; naming the
// first tensor whose gradient held inf/NaN (the order given to
// Backend::unscale_and_check) and what the scaler did turns each skipped
// step into one log line that says where to look.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine/amp/loss_scaler.h"
#include "engine/backend/backend.h"

namespace mixtrain {

// The name of the tensor check.tensor_index points at: tensor_names lists
// the parameters in the order their gradients were given to
// unscale_and_check. Throws EngineError(kInvalidArgument) unless
// check.found and the index is inside tensor_names.
std::string_view nonfinite_tensor_name(std::span<const std::string> tensor_names,
                                       const NonFiniteCheck& check);

// One line for a skipped step, e.g.
//   "step 41: overflow in transformer.h.3.mlp.c_fc.weight grad (inf); loss
//    scale 65536 -> 32768, step skipped"
// ending "loss scale 65536 kept (hysteresis), step skipped" when the
// backoff was deferred and "loss scale 1 kept, step skipped" when the scale
// did not change otherwise. Same preconditions as nonfinite_tensor_name,
// and decision.skip (else EngineError(kInvalidArgument)).
std::string describe_overflow(int64_t step, std::span<const std::string> tensor_names,
                              const NonFiniteCheck& check, const StepDecision& decision);

}  // namespace mixtrain
