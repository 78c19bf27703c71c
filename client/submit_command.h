// Why: `mixtrain submit JOB.yaml [--follow]` (DESIGN.md §3) hands a job to
// the coordinator, which validates it exactly as `mixtrain train` would and
// names every problem; with --follow it then watches the job to its end.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/coordinator_client.h"

namespace mixtrain::cli {

struct SubmitCommandArgs {
  std::string spec_path;
  std::vector<std::string> overrides;  // --set key=value, in order
  std::optional<int64_t> priority;     // --priority N: --set scheduling.priority=N, last
  bool follow = false;
};

// Submits the spec file at `path` (named by its file name in the
// coordinator's messages) with `overrides` ("key.path=value", applied by
// the coordinator before it validates) and sets `id`. Returns 0, or the
// exit code after printing why to `err`: 2 for an unreadable file or an
// invalid spec (the coordinator's message lines), else as
// CoordinatorClient::report.
int submit_job_file(CoordinatorClient& client, const std::filesystem::path& path,
                    const std::vector<std::string>& overrides, std::string& id, std::ostream& err);

// Submits and prints the id ("submitted ID", or {"id": "ID"} with -o
// json); with --follow, follows the job (job_follower.h; the id line then
// goes to `err` in JSON form so that `out` holds one document) and returns
// 0 when it succeeded, 1 when it failed or was cancelled.
int run_submit_command(CoordinatorClient& client, const SubmitCommandArgs& args,
                       OutputFormat format, bool terminal, std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
