// Why: `mixtrain submit --follow` and `mixtrain local` watch a job to its
// end the way `mixtrain train` shows its own run (progress_printer.h):
// state changes as lines, progress in place on a terminal and as plain
// lines otherwise, then the outcome and the summary. A coordinator that
// restarts mid-job must not end the follow, so a broken stream is
// reopened with backoff (its first message is the job's current state).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "client/coordinator_client.h"
#include "proto/mixtrain.pb.h"

namespace mixtrain::cli {

struct FollowOptions {
  OutputFormat format = OutputFormat::kTable;
  bool terminal = false;  // stdout is a terminal: the progress line is rewritten in place
  // Asked every 100 ms (from another thread while a stream is open); a non-empty answer
  // (why) ends the follow with exit code 1. Empty function: never.
  std::function<std::string()> stop_reason;
  // How long the coordinator may stay unreachable before giving up (exit 3).
  std::chrono::seconds give_up_after{300};
};

struct FollowResult {
  int exit_code = 0;           // 0 succeeded, 1 failed or cancelled (or stopped), 2/3 per report()
  std::optional<v1::Job> job;  // the last state seen, with summary_json once final
};

// Follows job `id` until it is final. Table form: state changes, progress,
// the outcome and the summary table on `out`. JSON form: state changes,
// progress and the outcome on `err`, and only the §5 summary JSON (when the
// job left one) on `out`. Uses WatchJob, or polls GetJob every second when
// the coordinator does not serve WatchJob.
FollowResult follow_job(CoordinatorClient& client, const std::string& id,
                        const FollowOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
