// Why: `mixtrain logs ID [-f]` (DESIGN.md §3) shows what a job's ranks
// printed, from the coordinator's stored tail, like `kubectl logs`. With
// -f it follows new lines until the job ends, and like `submit --follow`
// it outlives a coordinator restart: it reconnects and skips the lines the
// new stream resends.
#pragma once

#include <ostream>
#include <string>

#include "coordinator_client.h"
#include "mixtrain.pb.h"

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

// Where a followed log got to, so that a reconnected stream (which starts
// again from the stored tail) prints only what was not printed yet.
class LogCursor {
 public:
  // True when `line` is new: after the last accepted line (by time, and
  // past that very line when times tie). Accepted lines become the last.
  bool accept(const v1::LogLine& line);
  // A new stream begins: its lines up to the last accepted one are old.
  void restart() { past_last_ = !have_last_; }
  // True until a line was accepted.
  bool empty() const { return !have_last_; }

 private:
  bool have_last_ = false;
  bool past_last_ = true;
  v1::LogLine last_;
};

}  // namespace mixtrain::cli
