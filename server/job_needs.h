// Why: scheduling a job needs a handful of its spec's values (how many
// workers of which backend, how many restarts, each rank's planned memory,
// the loss-scale floor the workers export). The spec is parsed and
// validated once, at submit; these are stored beside it as columns, so no
// scheduler pass parses YAML and its cost does not grow with specs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/config/job_spec.h"
#include "engine/plan/memory_plan.h"

namespace mixtrain::server {

struct JobNeeds {
  int32_t workers = 1;
  config::BackendChoice backend = config::BackendChoice::kAuto;
  int32_t max_restarts = 0;
  int32_t zero_stage = 0;
  plan::RankMemory memory;               // each rank's planned peak bytes
  std::optional<double> min_loss_scale;  // dynamic loss scaling's floor (Task.min_loss_scale)
  // The oldest GPU a CUDA rank can train on, as major * 10 + minor: 89
  // (Ada; fp8 tensor cores) for compute fp8, 0 for any.
  int32_t min_compute_capability = 0;

  bool operator==(const JobNeeds&) const = default;
};

// The GPU generation compute fp8 needs (sm_89).
inline constexpr int32_t kFp8ComputeCapability = 89;

// What `spec` (parsed and validated) asks of the scheduler. Throws
// EngineError(kInvalidArgument) when its memory is too large to plan.
JobNeeds job_needs(const config::JobSpec& spec);

// "each needs N GiB [plus M GiB offloaded] for P parameters at zero.stage
// S".
std::string describe_rank_memory(const JobNeeds& needs);

}  // namespace mixtrain::server
