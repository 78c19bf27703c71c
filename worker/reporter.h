// Why: progress, log lines and above all the final outcome of a task must
// reach the coordinator even when it restarts mid-run, without slowing the
// task down or flooding the coordinator. The reporter queues them and one
// thread delivers them: RUNNING progress at most twice a second (the
// latest always delivered), logs in batches (every 0.5 s or 100 lines),
// the final outcome after the task's last log lines, each retried with
// backoff while the coordinator is unreachable or does not know this
// worker (it then asks the agent to register again).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include "proto/mixtrain.pb.h"
#include "worker/worker_connection.h"

namespace mixtrain::worker {

class Reporter {
 public:
  static constexpr std::chrono::milliseconds kProgressInterval{500};
  static constexpr std::chrono::milliseconds kLogInterval{500};
  static constexpr size_t kLogBatch = 100;
  // Lines kept per task while the coordinator is unreachable; older ones
  // are dropped (and the drop is reported as a line).
  static constexpr size_t kMaxQueuedLines = 20000;

  // Delivers through `connection` (which must outlive the reporter);
  // calls `on_unknown_worker` (on the reporter's thread) with the id a call
  // carried when the coordinator answers it NOT_FOUND, and `on_counted` with the time a
  // progress report was sent once the coordinator counted it as a
  // heartbeat (ReportProgressResponse.counted). Nothing is sent before
  // set_worker_id.
  Reporter(WorkerConnection& connection,
           std::function<void(const std::string&)> on_unknown_worker,
           std::function<void(std::chrono::steady_clock::time_point)> on_counted = {});
  // Stops the delivery thread; what was not delivered is lost (see flush).
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // The id reports carry from now on (after each registration).
  void set_worker_id(const std::string& id);

  // The latest progress of a running task; replaces any not yet sent.
  void progress(const v1::RunningTask& task, const v1::Progress& progress);
  // One output line of a task.
  void log(const v1::RunningTask& task, std::string line);
  // The task ended: its remaining lines, then a final ReportProgress with
  // `outcome`, `message`, `summary_json` and the last progress.
  void finish(const v1::RunningTask& task, v1::TaskOutcome outcome, const std::string& message,
              const std::string& summary_json);

  // The tasks whose final outcome is queued or being sent, oldest first.
  // The agent lists them as running until the coordinator took the
  // outcome, so that a finished task is never taken for one that vanished.
  std::vector<v1::RunningTask> unreported_finals() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until everything queued was delivered (or dropped as refused),
  // at most `timeout`; true when nothing is left.
  bool flush(std::chrono::milliseconds timeout);

 private:
  using Clock = std::chrono::steady_clock;
  struct Final {
    v1::TaskOutcome outcome = v1::TASK_OUTCOME_UNSPECIFIED;
    std::string message;
    std::string summary_json;
  };
  // What is still to be sent for one task.
  struct Pending {
    v1::RunningTask task;
    std::deque<std::string> lines;
    Clock::time_point oldest_line;  // when the first of `lines` was queued
    size_t dropped_lines = 0;
    v1::Progress progress;
    bool progress_unsent = false;
    Clock::time_point progress_sent;  // last RUNNING report
    std::optional<Final> final;
  };
  // One call the delivery thread decided to make.
  struct Call {
    enum class Kind { kLog, kProgress, kFinal } kind;
    v1::ReportLogRequest log;
    v1::ReportProgressRequest progress;
  };

  void run();
  // The next call due now (moving its content out of pending_), if any.
  std::optional<Call> next_call(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts back what a failed call took out of pending_.
  void restore(const Call& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Pending& pending_for(const v1::RunningTask& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `call`; `counted` tells whether the coordinator counted it as a heartbeat.
  grpc::Status send(const Call& call, bool& counted);
  // No lines, unsent progress or final outcome queued and no call in flight.
  bool nothing_to_send() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkerConnection& connection_;
  const std::function<void(const std::string&)> on_unknown_worker_;
  const std::function<void(std::chrono::steady_clock::time_point)> on_counted_;
  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);  // oldest task first
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;       // a call is being made
  std::optional<v1::RunningTask> final_in_flight_ ABSL_GUARDED_BY(mu_);  // its task, for a final
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;      // something new to look at
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;  // send everything now, due or not
  std::thread thread_;
};

}  // namespace mixtrain::worker
