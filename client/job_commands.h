// Why: `mixtrain jobs`, `status ID` and `cancel ID` (DESIGN.md §3) are how
// a user sees and manages what the coordinator holds: a table to scan or
// the JSON objects of §5 for scripts.
#pragma once

#include <ostream>
#include <string>

#include "client/coordinator_client.h"

namespace mixtrain::cli {

// How many of the newest jobs `mixtrain jobs` lists without --all.
inline constexpr int kRecentJobs = 50;

// Lists the kRecentJobs newest jobs, or with `all` every job (following
// every ListJobs page), oldest first: a table (ID, NAME, STATE, PRIORITY,
// ATTEMPT, STEP/STEPS, AGE, MESSAGE) or a JSON list of job_json(job,
// false). A table of only the newest says so on `err` when there are more.
// Returns 0, or CoordinatorClient::report's exit code.
int run_jobs_command(CoordinatorClient& client, bool all, OutputFormat format, std::ostream& out,
                     std::ostream& err);

// Shows one job: state, attempt, restarts, progress, workers, message, the
// event history and, once finished, the summary; or job_json(job, true).
// Returns 0, 2 for an unknown id ("no job ID"), or report's exit code.
int run_status_command(CoordinatorClient& client, const std::string& id, OutputFormat format,
                       std::ostream& out, std::ostream& err);

// Cancels a queued or running job and prints its new state ("ID
// CANCELLED", or job_json(job, false)). Returns 0; 2 for an unknown id or
// a job that already finished (the coordinator's reason printed); else
// report's exit code.
int run_cancel_command(CoordinatorClient& client, const std::string& id, OutputFormat format,
                       std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
