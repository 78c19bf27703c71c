// Why: the coordinator must lose no job, queue entry or history when it is
// killed (issue 5), so every job, attempt, state change and the tail of each
// job's log live in SQLite (WAL) and every state change is one transaction
// that checks the transition is legal. The scheduler and the gRPC services
// keep no job state of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "mixtrain.pb.h"
#include "sqlite_db.h"

namespace mixtrain::server {

struct JobRecord {
  std::string id;
  std::string name;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string spec_yaml;
  int64_t steps = 0;
  int32_t attempt = 0;  // number of times it was started
  std::string message;  // from the latest transition
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

struct JobEventRecord {
  int64_t unix_ms = 0;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string message;
};

struct AttemptRecord {
  int32_t attempt = 0;
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;                         // 0 while running
  v1::JobState outcome = v1::JOB_STATE_UNSPECIFIED;  // the state it ended in
};

struct LogRecord {
  int32_t attempt = 0;
  int32_t rank = 0;
  int64_t unix_ms = 0;
  std::string text;
};

struct JobStoreOptions {
  int64_t log_tail_lines = 10000;  // lines kept per job; older ones are dropped
};

// Thread safe. Errors of SQLite itself are INTERNAL.
class JobStore {
 public:
  // Opens (creating if needed) the store at `path`; a store reopened on the
  // same file sees everything committed before.
  static absl::StatusOr<std::unique_ptr<JobStore>> open(const std::string& path,
                                                        const JobStoreOptions& options = {});

  // Records a new QUEUED job with a fresh id (and its first event).
  absl::StatusOr<JobRecord> create_job(std::string_view name, std::string_view spec_yaml,
                                       int64_t steps);

  // NOT_FOUND for an unknown id.
  absl::StatusOr<JobRecord> get_job(std::string_view id);

  // Every job, oldest first.
  absl::StatusOr<std::vector<JobRecord>> list_jobs();

  // Moves the job to `to` and records the event, in one transaction. Legal:
  // QUEUED → RUNNING | CANCELLED; RUNNING → SUCCEEDED | FAILED | CANCELLED,
  // or QUEUED again (a restart). Entering RUNNING starts a new attempt,
  // leaving it ends that attempt. FAILED_PRECONDITION for any other move,
  // NOT_FOUND for an unknown id; nothing changes then.
  absl::StatusOr<JobRecord> transition(std::string_view id, v1::JobState to,
                                       std::string_view message);

  // The job's state changes, oldest first.
  absl::StatusOr<std::vector<JobEventRecord>> events(std::string_view id);
  absl::StatusOr<std::vector<AttemptRecord>> attempts(std::string_view id);

  // Appends one line to the job's log, dropping the oldest beyond the tail.
  absl::Status append_log(std::string_view id, int32_t attempt, int32_t rank,
                          std::string_view text);
  // The stored tail, oldest first.
  absl::StatusOr<std::vector<LogRecord>> logs(std::string_view id);

 private:
  JobStore(std::unique_ptr<SqliteDb> db, const JobStoreOptions& options)
      : db_(std::move(db)), options_(options) {}

  absl::StatusOr<JobRecord> get_job_locked(std::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status add_event_locked(std::string_view id, v1::JobState state, std::string_view message,
                                int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  const JobStoreOptions options_;
};

// True when the job store allows moving from `from` to `to` (see transition).
bool is_legal_transition(v1::JobState from, v1::JobState to);

}  // namespace mixtrain::server
