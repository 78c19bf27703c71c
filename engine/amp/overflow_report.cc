// Why: see overflow_report.h.
#include "engine/amp/overflow_report.h"

#include "engine/amp/scale_format.h"
#include "engine/common/error.h"

namespace mixtrain {

std::string_view nonfinite_tensor_name(std::span<const std::string> tensor_names,
                                       const NonFiniteCheck& check) {
  MIXTRAIN_CHECK_ARG(check.found, "nonfinite_tensor_name: the check found no inf/NaN");
  MIXTRAIN_CHECK_ARG(check.tensor_index >= 0 &&
                         static_cast<size_t>(check.tensor_index) < tensor_names.size(),
                     "nonfinite_tensor_name: tensor index " +
                         std::to_string(check.tensor_index) + " is outside the " +
                         std::to_string(tensor_names.size()) + " names given");
  return tensor_names[static_cast<size_t>(check.tensor_index)];
}

std::string describe_overflow(int64_t step, std::span<const std::string> tensor_names,
                              const NonFiniteCheck& check, const StepDecision& decision) {
  MIXTRAIN_CHECK_ARG(decision.skip, "describe_overflow: step " + std::to_string(step) +
                                        " was not skipped");
  std::string line = "step " + std::to_string(step) + ": overflow in " +
                     std::string(nonfinite_tensor_name(tensor_names, check)) + " grad (" +
                     (check.is_nan ? "nan" : "inf") + "); loss scale " +
                     format_scale(decision.old_scale);
  if (decision.scale_changed) {
    line += " -> " + format_scale(decision.new_scale);
  } else {
    line += decision.backoff_deferred ? " kept (hysteresis)" : " kept";
  }
  return line + ", step skipped";
}

}  // namespace mixtrain
