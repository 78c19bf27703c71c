// Why: the coordinator must lose no job, queue entry or history when it is
// killed (issue 5), so every job, attempt, state change and the tail of each
// job's log live in SQLite (WAL) and every state change is one transaction
// that checks the transition is legal. The scheduler and the gRPC services
// keep no job state of their own.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/mixtrain.pb.h"
#include "server/job_needs.h"
#include "server/sqlite_db.h"

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
  int32_t restarts = 0;              // times it went RUNNING → QUEUED
  v1::Progress progress;             // the latest one stored (steps always set)
  std::string summary_json;          // once finished, when the workers sent one
  std::vector<std::string> workers;  // worker id by rank, of the latest attempt
  // What scheduling needs from the spec, and the validated spec the tasks
  // get (config::job_spec_to_json), stored at submit. Unset / empty only
  // for a job stored by an older coordinator whose spec no longer parses.
  std::optional<JobNeeds> needs;
  std::string spec_json;
  // What the latest attempt's `auto` keys became ("zero.stage 2,
  // train.activation_checkpointing none"); empty without any.
  std::string configuration;
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
  int64_t seq = 0;  // grows with every line of every job
};

// Told about every committed change, after the store's lock is released;
// methods must be thread safe and must not block for long.
class JobDatabaseListener {
 public:
  virtual ~JobDatabaseListener() = default;
  // The job's row changed (state, message or progress), or it was created.
  virtual void job_changed(const std::string& id) = 0;
  // `line` was appended to the job's log after its line `previous_seq` (0:
  // its first): a listener told of two lines the other way round can tell
  // that one is missing.
  virtual void log_appended(const std::string& id, const LogRecord& line, int64_t previous_seq) = 0;
};

// What a transition records besides the state and message.
struct TransitionDetails {
  std::vector<std::string> workers;  // entering RUNNING: the worker id of each rank
  std::string summary_json;          // entering SUCCEEDED or FAILED: the job's summary
  std::string configuration;         // entering RUNNING: what its `auto` keys became
  bool spends_restart = false;       // entering QUEUED after a failed attempt: counts a restart
};

// Which jobs list_jobs returns.
struct JobListing {
  std::vector<v1::JobState> states;  // empty: every state
  int64_t before = 0;                // only jobs stored before this position (0: from the newest)
  int64_t limit = 100;
};

struct ListedJob {
  JobRecord job;
  int64_t position = 0;  // where it is stored: a later listing goes on before it
};

// Which finished jobs delete_finished_jobs deletes (0 turns either rule off).
struct FinishedJobRetention {
  int64_t ended_before_unix_ms = 0;  // those that finished before this time
  int64_t keep_newest = 0;           // all but the newest this many finished jobs
};

struct JobDatabaseOptions {
  int64_t log_tail_lines = 10000;  // lines kept per job; older ones are dropped
};

// Thread safe; reads never wait for a write. Errors of SQLite itself are
// INTERNAL, or UNAVAILABLE when the database is busy or locked (worth
// retrying). Every write is refused with DATA_LOSS once the database file
// was deleted or replaced.
class JobDatabase {
 public:
  // Opens (creating if needed) the store at `path`, migrated to this
  // build's schema (job_schema.h; FAILED_PRECONDITION for a newer one); a
  // store reopened on the same file sees everything committed before.
  static absl::StatusOr<std::unique_ptr<JobDatabase>> open(const std::string& path,
                                                           const JobDatabaseOptions& options = {});

  // Records a new QUEUED job with a fresh id (and its first event).
  absl::StatusOr<JobRecord> create_job(std::string_view name, std::string_view spec_yaml,
                                       std::string_view spec_json, int64_t steps,
                                       const JobNeeds& needs);

  // NOT_FOUND for an unknown id.
  absl::StatusOr<JobRecord> get_job(std::string_view id);

  // A page of jobs, newest first, without spec texts or summary
  // (spec_yaml, spec_json and summary_json empty).
  absl::StatusOr<std::vector<ListedJob>> list_jobs(const JobListing& listing = {});
  // The QUEUED, RUNNING and PREEMPTED jobs, oldest first: what the scheduler looks at,
  // read through an index on state, so its cost follows the queue and not
  // the history. Without spec texts, summary or needs (spec_yaml,
  // spec_json and summary_json empty, needs unset): a pass over thousands
  // of queued jobs reads neither their specs nor parses their needs, which
  // never change (stored_needs has them).
  absl::StatusOr<std::vector<JobRecord>> list_active_jobs();
  // The needs stored with the job at submit, without reading its spec
  // texts; nullopt for a job stored without them or without its validated
  // spec (by an older coordinator, its spec no longer parsing). NOT_FOUND
  // for an unknown id.
  absl::StatusOr<std::optional<JobNeeds>> stored_needs(std::string_view id);
  // How many jobs are in each state (states without jobs absent): one
  // query, for the metrics page.
  absl::StatusOr<std::map<v1::JobState, int64_t>> count_jobs_by_state();

  // Moves the job to `to` and records the event, in one transaction. Legal:
  // QUEUED → RUNNING | CANCELLED; RUNNING → SUCCEEDED | FAILED | CANCELLED
  // | PREEMPTED, or QUEUED again; PREEMPTED → SUCCEEDED | FAILED |
  // CANCELLED | QUEUED. Entering QUEUED counts a restart when
  // details.spends_restart says so (a failed attempt, whether it was
  // running or stopping for a preemption). Entering RUNNING starts a new
  // attempt assigned to `details.workers` with `details.configuration` (kept after it ends),
  // leaving RUNNING or PREEMPTED for another state ends that attempt; a non-empty
  // `details.summary_json` is stored as the job's summary. FAILED_PRECONDITION for any other move,
  // NOT_FOUND for an unknown id; nothing changes then.
  absl::StatusOr<JobRecord> transition(std::string_view id, v1::JobState to,
                                       std::string_view message,
                                       const TransitionDetails& details = {});

  // Replaces the job's message without a state change (why it still waits).
  // NOT_FOUND for an unknown id.
  absl::Status set_message(std::string_view id, std::string_view message);
  // Stores the job's latest progress. NOT_FOUND for an unknown id.
  absl::Status set_progress(std::string_view id, const v1::Progress& progress);

  // Registers the one listener told about changes from now on; it must
  // outlive the store or be replaced by nullptr first.
  void set_listener(JobDatabaseListener* listener) { listener_.store(listener); }

  // The job's state changes, oldest first.
  absl::StatusOr<std::vector<JobEventRecord>> events(std::string_view id);
  absl::StatusOr<std::vector<AttemptRecord>> attempts(std::string_view id);

  // Appends one line to the job's log, dropping the oldest beyond the tail.
  // NOT_FOUND for an unknown id.
  absl::Status append_log(std::string_view id, int32_t attempt, int32_t rank,
                          std::string_view text);
  // The stored lines after the line numbered `after_seq`, oldest first, at
  // most `limit` of them (all when negative).
  absl::StatusOr<std::vector<LogRecord>> logs(std::string_view id, int64_t after_seq = 0,
                                              int64_t limit = -1);
  // The seq after which the job's last `lines` stored lines start (0 when
  // it has no more than that).
  absl::StatusOr<int64_t> seq_before_last(std::string_view id, int64_t lines);

  // Deletes the SUCCEEDED, FAILED and CANCELLED jobs that `retention` does
  // not keep, oldest first, with their log, events, attempts and
  // assignments, in one transaction that stops after about `max_rows`
  // jobs and log lines (a job goes once its log has); never a QUEUED,
  // RUNNING or PREEMPTED one. Returns the jobs and log lines it deleted:
  // call again until 0, other calls getting the store in between.
  absl::StatusOr<int64_t> delete_finished_jobs(const FinishedJobRetention& retention,
                                               int64_t max_rows);

 private:
  // The file a store was opened on, to notice it being deleted or replaced.
  struct FileIdentity {
    std::string path;
    uint64_t device = 0;
    uint64_t inode = 0;
  };

  JobDatabase(std::unique_ptr<SqliteDb> db, std::unique_ptr<SqliteDb> reader,
              const JobDatabaseOptions& options, FileIdentity file)
      : db_(std::move(db)), reader_(std::move(reader)), options_(options), file_(std::move(file)) {}

  // DATA_LOSS once the database file was deleted or replaced
  // while open: SQLite would go on writing to the unlinked file, and every
  // job recorded from then on would vanish at the next start. Called
  // before every write.
  absl::Status check_file_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // check_file_locked, then a write transaction.
  absl::StatusOr<SqliteTransaction> begin_write_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs `sql` (parameters: 1 the value, 2 the time, 3 the id) on one job.
  absl::Status update_column_locked(std::string_view sql, std::string_view value,
                                    std::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // update_column_locked under the lock, then tells the watchers.
  absl::Status update_job_column(std::string_view sql, std::string_view value, std::string_view id)
      ABSL_LOCKS_EXCLUDED(mu_);
  void notify_job_changed(std::string_view id);
  absl::Status add_event_locked(std::string_view id, v1::JobState state, std::string_view message,
                                int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Writes go through db_; reads through reader_, a second connection, so
  // that a write waiting out another process's lock (up to the busy
  // timeout) holds up no reader: in WAL mode readers never wait for it.
  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  absl::Mutex read_mu_;
  std::unique_ptr<SqliteDb> reader_ ABSL_GUARDED_BY(read_mu_);
  const JobDatabaseOptions options_;
  const FileIdentity file_;
  std::atomic<JobDatabaseListener*> listener_ = nullptr;
};

// True when the job database allows moving from `from` to `to` (see transition).
bool is_legal_transition(v1::JobState from, v1::JobState to);

}  // namespace mixtrain::server
