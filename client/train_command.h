// Why: `mixtrain train JOB.yaml` (DESIGN.md §3) runs a job without a
// coordinator, in this process or as --nproc local data-parallel ranks:
// the spec is validated before any work, progress is shown while it
// trains, and the summary JSON (every rank's entry) is written at the end.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mixtrain::cli {

struct TrainCommandArgs {
  std::string spec_path;
  std::vector<std::string> overrides;       // --set key=value, in order
  std::optional<std::string> resume;        // --resume DIR
  std::optional<std::string> summary_json;  // --summary-json FILE
  std::optional<int> nproc;                 // --nproc N; unset: resources.workers
  std::vector<std::string> argv;            // the whole command line, to start ranks with
};

// Runs the job; returns the exit code of DESIGN.md §3: 0 succeeded, 1 the
// job failed (the summary JSON, when asked for, says "failed"), 2 an
// invalid job spec or unusable arguments (every problem printed to `err`).
int run_train_command(const TrainCommandArgs& args, bool terminal, std::ostream& out,
                      std::ostream& err);

}  // namespace mixtrain::cli
