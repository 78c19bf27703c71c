// Why: `mixtrain local JOB.yaml --workers N` (DESIGN.md §2, §3) is the
// README demo: the real coordinator and N real workers on loopback, the
// job submitted and followed like `submit --follow`, and afterwards the
// checkpoint left where `mixtrain train` leaves one (./checkpoints/<name>)
// so that `mixtrain sample checkpoints/<name>` works, and nothing left
// running.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "client/output_format.h"

namespace mixtrain::cli {

struct LocalCommandArgs {
  std::string spec_path;
  std::optional<int> workers;               // --workers N; unset: the spec's resources.workers
  std::optional<std::string> summary_json;  // --summary-json FILE
  std::optional<std::string> keep_state;    // --keep-state DIR: state there, kept afterwards
  std::string http = "127.0.0.1:0";         // --http HOST:PORT: the coordinator's /metrics
};

// Validates the spec (exit 2 with every problem, before starting
// anything), starts the cluster (local_cluster.h), submits and follows the
// job, writes the summary, copies the final checkpoint to
// ./checkpoints/<name>, stops every process (also on SIGINT/SIGTERM) and
// removes the state directory unless the job failed or --keep-state was
// given (it is printed then). Returns 0 when the job succeeded; 1 when it
// failed, was cancelled or interrupted, or the cluster could not start or
// lost a process; 2 for an invalid spec or arguments.
int run_local_command(const LocalCommandArgs& args, OutputFormat format, bool terminal,
                      std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
