// Why: `mixtrain env` tells a user what this build can use on this machine
// (CPU features, oneDNN, CUDA devices, backends), like DeepSpeed's
// ds_report, before they wonder why a job runs slowly.
#pragma once

#include <ostream>

#include "client/output_format.h"

namespace mixtrain::cli {

// Prints the build and machine report; returns the process exit code (0).
int run_env_command(OutputFormat format, std::ostream& out);

}  // namespace mixtrain::cli
