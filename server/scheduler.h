// Why: the heart of the coordinator (issue 5). It gang-schedules QUEUED jobs
// onto idle workers (all ranks at once, FIFO with backfill), follows each
// running attempt's ranks through their reports and heartbeats, and turns
// a failed rank, a lost worker or a vanished task into a restart or a
// failure, cancelling the other ranks. After a coordinator restart it waits
// one worker timeout for the ranks of RUNNING jobs to come back. Job state
// lives in the JobStore; what is here (workers, attempts in flight) is
// rebuilt from the store and from re-registering workers.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "config/job_spec.h"
#include "coordinator_metrics.h"
#include "job_store.h"
#include "mixtrain.pb.h"
#include "rendezvous_store.h"
#include "task_outbox.h"
#include "worker_registry.h"

namespace mixtrain::server {

struct SchedulerOptions {
  std::chrono::milliseconds worker_timeout{10'000};  // silent this long: LOST
  std::string checkpoint_root;  // absolute; a job checkpoints in <root>/<job id>
  std::string data_root;        // absolute; given to workers with each task
};

// Thread safe.
class Scheduler {
 public:
  // Every pointer must outlive the scheduler.
  Scheduler(JobStore* store, RendezvousStore* rendezvous, TaskOutbox* outbox,
            CoordinatorMetrics* metrics, SchedulerOptions options);
  ~Scheduler() { stop(); }
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Takes over the RUNNING jobs of the store (their ranks get one worker
  // timeout to re-register) and starts the scheduling thread.
  absl::Status start();
  // Stops the scheduling thread. Idempotent.
  void stop();

  // Wakes the scheduling thread (a job was submitted).
  void wake();

  // How often workers should heartbeat: a fifth of the timeout, >= 200 ms.
  int heartbeat_interval_ms() const;

  // Registers a worker, keeping `previous_worker_id` when given, and takes
  // over the tasks it reports running that belong to a running attempt
  // (others are cancelled).
  v1::RegisterResponse register_worker(const v1::RegisterRequest& request);
  // Records a heartbeat; reregister=true for an unknown or lost worker.
  v1::HeartbeatResponse heartbeat(const v1::HeartbeatRequest& request);
  // A rank's progress or outcome; NOT_FOUND for an unknown worker. Reports
  // of other attempts than the running one are ignored.
  absl::Status report_progress(const v1::ReportProgressRequest& request);
  // Appends to the job's log; NOT_FOUND for an unknown worker or job.
  absl::Status report_log(const v1::ReportLogRequest& request);
  // OK for a registered worker, else NOT_FOUND.
  absl::Status check_worker(const std::string& worker_id);

  // Cancels a queued or running job (every running rank is told to stop);
  // FAILED_PRECONDITION when it already finished, NOT_FOUND when unknown.
  absl::StatusOr<JobRecord> cancel_job(const std::string& job_id);
  // Every worker, in registration order.
  std::vector<v1::Worker> list_workers();

 private:
  struct Needs {  // what a job asks for, from its spec
    int64_t workers = 1;
    config::BackendChoice backend = config::BackendChoice::kAuto;
    int64_t max_restarts = 0;
  };
  struct Rank {
    std::string worker_id;
    bool back = true;  // false after a coordinator restart until it re-registers
    v1::TaskOutcome outcome = v1::TASK_OUTCOME_UNSPECIFIED;
    std::string summary_json;
  };
  struct Attempt {
    int32_t attempt = 0;
    std::vector<Rank> ranks;
    int64_t max_restarts = 0;
    int64_t last_progress_ms = 0;  // when rank 0's progress was last stored
    int64_t recover_until_ms = 0;  // after a restart: ranks must be back by then; 0: are back
  };

  void run();
  bool should_wake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return dirty_ || stopping_; }
  void tick_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void schedule_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Needs> needs_locked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void start_attempt_locked(const JobRecord& job, const Needs& needs,
                            const std::vector<WorkerEntry*>& workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the running attempt of `job_id` as failed because of `cause`:
  // cancels its other ranks, frees its workers, requeues or fails the job.
  void fail_attempt_locked(const std::string& job_id, const std::string& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the running attempt of `job_id`: tells each rank still running
  // to stop (`reason`), frees or schedules the release of its worker, drops
  // the rendezvous scope.
  void end_attempt_locked(const std::string& job_id, const std::string& reason,
                          bool free_workers_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void succeed_locked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // " (after attempt N failed: ...)" for a restarted job, else "".
  std::string after_failure_locked(const std::string& job_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt running `task` on `worker_id`, or nullptr.
  Attempt* attempt_of_locked(const v1::RunningTask& task, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank that stopped without an outcome (`how`): fails its attempt, or
  // just frees the worker when the job no longer runs.
  void task_vanished_locked(WorkerEntry& worker, const std::string& how)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void send_cancel_locked(const std::string& worker_id, const std::string& job_id, int32_t attempt,
                          const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  RendezvousStore* const rendezvous_;
  TaskOutbox* const outbox_;
  CoordinatorMetrics* const metrics_;
  const SchedulerOptions options_;

  absl::Mutex mu_;
  WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Attempt> running_ ABSL_GUARDED_BY(mu_);  // by job id
  std::map<std::string, Needs> needs_ ABSL_GUARDED_BY(mu_);      // by job id, parsed once
  // The cause of the latest failed attempt of a requeued job, shown in its
  // messages until it finishes (the events keep every cause).
  std::map<std::string, std::string> last_failure_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = true;  // something to schedule
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// "<job id>/<attempt>": the Store namespace of one attempt.
std::string rendezvous_scope(const std::string& job_id, int32_t attempt);

}  // namespace mixtrain::server
