// Why: scheduling a job needs a handful of its spec's values (how many
// workers of which backend, how many restarts, each rank's planned memory
// in the configurations it may run with, the loss-scale floor the workers
// export). The spec is parsed and
// validated once, at submit; these are stored beside it as columns, so no
// scheduler pass parses YAML and its cost does not grow with specs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/job_spec.h"
#include "engine/plan/plan_alternatives.h"

namespace mixtrain::server {

struct JobNeeds {
  int32_t workers = 1;
  config::BackendChoice backend = config::BackendChoice::kAuto;
  int32_t max_restarts = 0;
  int32_t priority = 0;     // scheduling.priority: higher starts first
  bool preemptible = true;  // scheduling.preemptible
  // The ZeRO stage, offloads and checkpointing a rank may run with and its
  // planned peak bytes in each, cheapest first: the spec's own, or every
  // choice of the keys it leaves `auto` (plan::rank_configurations).
  std::vector<plan::RankConfiguration> configurations;
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

// The configuration of `needs` that asks least of a worker: the smallest
// device peak, then host peak.
const plan::RankConfiguration& smallest_configuration(const JobNeeds& needs);

// "each needs N GiB [plus M GiB offloaded] for P parameters at zero.stage
// S [+ ...]", or with `auto` keys "each needs at least ..." of the smallest
// configuration.
std::string describe_rank_memory(const JobNeeds& needs);

// The configurations as stored: [{"zero_stage": 3, ..., "parameters": P,
// "device": D, "host": H}, ...], and back (throws EngineError on a
// malformed one).
std::string configurations_json(const std::vector<plan::RankConfiguration>& configurations);
std::vector<plan::RankConfiguration> configurations_from_json(const std::string& text);

}  // namespace mixtrain::server
