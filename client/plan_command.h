// Why: `mixtrain plan JOB.yaml` answers "will it fit, and if not, what
// would?" before a run: a rank's peak memory by category for the job as
// written (the summary's memory_bytes, predicted), its per-step costs,
// and the ZeRO / offload / checkpointing choices that fit a worker's
// memory, cheapest first.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/output_format.h"

namespace mixtrain::cli {

struct PlanCommandArgs {
  std::string spec_path;
  std::vector<std::string> overrides;            // --set key=value, in order
  std::optional<int> workers;                    // --workers N; unset: resources.workers
  std::optional<std::string> memory_per_worker;  // --memory-per-worker 80GiB
};

// Prints the plan; returns 0, or 2 for an invalid spec or argument (said
// on `err`).
int run_plan_command(const PlanCommandArgs& args, OutputFormat format, std::ostream& out,
                     std::ostream& err);

}  // namespace mixtrain::cli
