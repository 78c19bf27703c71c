// Why: WatchJob and StreamLogs stream a job's changes and new log lines as
// they happen, without polling: the job database tells this hub about every
// committed change, and the hub pushes to the streams of that job. A stream
// ends when its job reaches a final state, its client goes away, or the
// coordinator shuts down (close()).
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/mixtrain.pb.h"
#include "server/coordinator_metrics.h"
#include "server/job_database.h"

namespace mixtrain::server {

class JobWatch;
class LogFollow;

class JobWatchers final : public JobDatabaseListener {
 public:
  // `database` and `metrics` must outlive the hub; the hub does not
  // register itself.
  JobWatchers(JobDatabase* database, CoordinatorMetrics* metrics)
      : database_(database), metrics_(metrics) {}

  // A stream of the job: its current state first, then every change of
  // state, progress or message; it ends after a final state. NOT_FOUND for
  // an unknown id.
  grpc::ServerWriteReactor<v1::JobUpdate>* watch(const std::string& job_id);
  // The job's stored log (after `after_seq`, or its last `tail_lines` when
  // positive); with `follow`, then every new line until the job is final.
  // NOT_FOUND for an unknown id. A follower costs nothing while its client
  // does not read (log_follow.h).
  grpc::ServerWriteReactor<v1::LogLine>* stream_logs(const v1::StreamLogsRequest& request);

  void job_changed(const std::string& id) override;
  // Hands the line to the job's followers; never reads the store.
  void log_appended(const std::string& id, const LogRecord& line, int64_t previous_seq) override;

  // Ends every stream (UNAVAILABLE) and refuses new ones. Idempotent.
  void close();

 private:
  friend class JobWatch;
  friend class LogFollow;
  void forget(JobWatch* watch);
  void forget(LogFollow* follow);
  // Asks each of `follows` to finish with `status`; returns those whose
  // final read of the store is due (read_store(), once the lock is released).
  std::vector<LogFollow*> finish_locked(const std::set<LogFollow*>& follows,
                                        const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `watch` the job's state `record` if it changed; ends it when final.
  void update_locked(JobWatch& watch, const JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobDatabase* const database_;
  CoordinatorMetrics* const metrics_;
  // Never held while waiting for the store (job_changed's read aside).
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::set<JobWatch*>> watches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<LogFollow*>> follows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixtrain::server
