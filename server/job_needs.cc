// Why: see job_needs.h.
#include "server/job_needs.h"

#include <cstdio>

#include "engine/backend/memory_tracker.h"

namespace mixtrain::server {

JobNeeds job_needs(const config::JobSpec& spec) {
  const config::PrecisionSpec& precision = spec.precision;
  return JobNeeds{
      .workers = static_cast<int32_t>(spec.resources.workers),
      .backend = spec.resources.backend,
      .max_restarts = static_cast<int32_t>(spec.retries.max_restarts),
      .zero_stage = static_cast<int32_t>(spec.zero.stage),
      .memory = plan::rank_memory(spec),
      .min_loss_scale = config::effective_loss_scale(precision) == config::LossScaleMode::kDynamic
                            ? std::optional<double>(precision.min_scale)
                            : std::nullopt,
      .min_compute_capability = config::is_fp8_compute(precision) ? kFp8ComputeCapability : 0};
}

std::string describe_rank_memory(const JobNeeds& needs) {
  char parameters[32];
  std::snprintf(parameters, sizeof(parameters), "%.3g", needs.memory.parameters);
  std::string text = "each needs " + gib_text(needs.memory.device);
  if (needs.memory.host > 0) text += " plus " + gib_text(needs.memory.host) + " offloaded";
  return text + " for " + parameters + " parameters at zero.stage " +
         std::to_string(needs.zero_stage);
}

}  // namespace mixtrain::server
