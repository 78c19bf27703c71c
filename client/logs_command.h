// Why: `mixtrain logs ID [-f]` (DESIGN.md §3) shows what a job's ranks
// printed, from the coordinator's stored tail, like `kubectl logs`. With
// -f it follows new lines until the job ends, and like `submit --follow`
// it outlives a coordinator restart: it reconnects after the last line it
// printed (StreamLogsRequest.after_seq), so no line is lost or repeated.
#pragma once

#include <ostream>
#include <string>

#include "client/coordinator_client.h"

namespace mixtrain::cli {

struct LogsCommandArgs {
  std::string id;
  bool follow = false;  // -f: keep printing new lines until the job ends
  int tail = 0;         // --tail N: only the last N stored lines; 0: all
};

// Prints each line as "[attempt A rank R] TEXT" (table form) or as one
// JSON object per line {"attempt","rank","unix_ms","text"} (-o json).
// Returns 0 once the stream ends, 2 for an unknown id, else
// CoordinatorClient::report's exit code (after 5 minutes of trying to
// reconnect, with -f).
int run_logs_command(CoordinatorClient& client, const LogsCommandArgs& args, OutputFormat format,
                     std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
