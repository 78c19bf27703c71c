// Why: the heart of the coordinator (issue 5). It gang-schedules QUEUED and
// PREEMPTED jobs onto idle workers, all ranks at once: highest priority
// first, oldest first within a priority, and a later job that fits passes
// one that cannot start (backfill). When the highest-priority waiting job
// could start only on workers running preemptible jobs of a lower
// priority, it preempts the fewest of those (lowest priority, newest
// first) and holds lower-priority jobs back from the room that makes; a
// preempted attempt's ranks checkpoint at a step they agree on and stop
// (or are stopped after preempt_grace), and the job waits as PREEMPTED to
// resume from that checkpoint without spending a restart. It follows each
// running attempt's ranks through their reports and heartbeats, and turns
// a failed rank, a lost worker or a vanished task into a restart or a
// failure, cancelling the other ranks. After a coordinator restart it
// waits one worker timeout (plus net::kRestartReconnectMargin) for the
// ranks of RUNNING jobs to come back. Job state lives in the JobDatabase;
// what is here (workers, attempts in flight) is rebuilt from the store and
// from re-registering workers. Each attempt moves through one state machine
// (attempt_state.h): the scheduler turns what happens into its events and
// takes the actions the table gives. Decisions are made under one lock; the
// store is never read or written under it (issue 32): what a decision
// writes is queued and committed by the scheduling thread after the lock
// is released, in the order decided, and what follows a write (the START
// of an attempt, the release of its workers) is done once it committed.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "proto/mixtrain.pb.h"
#include "server/attempt_state.h"
#include "server/coordinator_metrics.h"
#include "server/job_database.h"
#include "server/placement.h"
#include "server/rank_state.h"
#include "server/rendezvous_store.h"
#include "server/summary_merge.h"
#include "server/task_outbox.h"
#include "server/worker_registry.h"
#include "server/worker_secrets.h"

namespace mixtrain::server {

struct SchedulerOptions {
  std::chrono::milliseconds worker_timeout{10'000};  // silent this long: LOST
  std::string checkpoint_root;  // absolute; a job checkpoints in <root>/<job id>
  std::string data_root;        // absolute; given to workers with each task
  // A hung rank (alive, heartbeating, but stepping no more) is noticed when
  // rank 0 reports no new step for max(stall_timeout, kStallSteps × its
  // recent step time): the attempt then fails with "no progress".
  // Batches of an evaluation under way count as progress too.
  std::chrono::milliseconds stall_timeout{120'000};
  // How long a preempted job's ranks have to checkpoint and stop before
  // they are stopped anyway (it then resumes from its last checkpoint).
  std::chrono::milliseconds preempt_grace{120'000};
  // An attempt whose rank 0 reports no step this long after the attempt
  // started (or was taken over after a restart) fails with "no progress":
  // the stall timeout needs a measured step time, which a rank frozen
  // before its first step never gives.
  std::chrono::milliseconds first_step_timeout{1'800'000};
  // How long a LOST worker stays listed (after its timeout) before it is
  // forgotten, credentials included.
  std::chrono::milliseconds lost_worker_retention{300'000};
};

// Thread safe.
class Scheduler {
 public:
  // Every pointer must outlive the scheduler.
  Scheduler(JobDatabase* database, WorkerSecrets* secrets, RendezvousStore* rendezvous,
            TaskOutbox* outbox, CoordinatorMetrics* metrics, SchedulerOptions options);
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

  // Registers a worker, keeping `previous_worker_id` when it is known
  // (here or, after a restart, in the secrets store) and giving a new id
  // otherwise, and takes over the tasks it reports running that belong to
  // a running attempt (others are cancelled, and the worker drains them).
  // PERMISSION_DENIED when the id is known under another secret than
  // previous_worker_secret. A new worker replaces the LOST entries of the
  // same hostname and metrics address (the same agent, restarted). It is
  // JOINING until it heartbeats and opens its task stream.
  absl::StatusOr<v1::RegisterResponse> register_worker(const v1::RegisterRequest& request);

  // Each call below names a worker and presents `secret`: NOT_FOUND for an
  // unknown worker, PERMISSION_DENIED for a wrong secret.
  // Records a heartbeat; reregister=true for an unknown or lost worker.
  absl::StatusOr<v1::HeartbeatResponse> heartbeat(const v1::HeartbeatRequest& request,
                                                  const std::string& secret);
  // A rank's progress or outcome, with its summary_json already read
  // (read_reported_summary); counted=true when the worker holds the task
  // (it then counts as a heartbeat). Reports of tasks the worker does not
  // hold (other attempts) are ignored.
  absl::StatusOr<v1::ReportProgressResponse> report_progress(
      const v1::ReportProgressRequest& request, const std::string& secret, ReportedSummary summary);
  // Appends to the job's log, for the task the worker holds (else ignored).
  absl::Status report_log(const v1::ReportLogRequest& request, const std::string& secret);
  // OK for a registered worker whose secret this is (NOT_FOUND, or
  // PERMISSION_DENIED, as for every call of a worker).
  absl::Status check_worker(const std::string& worker_id, const std::string& secret);
  // OK for a registered worker, which is about to read its task stream.
  absl::Status open_task_stream(const std::string& worker_id, const std::string& secret);
  // The worker leaves: forgets it and its secret; a rank it still held
  // vanished (its attempt fails).
  absl::Status deregister_worker(const std::string& worker_id, const std::string& secret);
  // OK when the worker holds a rank of the running attempt whose
  // rendezvous scope is `scope`; else PERMISSION_DENIED.
  absl::Status check_store_access(const std::string& worker_id, const std::string& secret,
                                  const std::string& scope);

  // Cancels a queued or running job (every running rank is told to stop);
  // FAILED_PRECONDITION when it already finished, NOT_FOUND when unknown.
  absl::StatusOr<JobRecord> cancel_job(const std::string& job_id);
  // Every worker, in registration order.
  std::vector<v1::Worker> list_workers();
  // At most `size` workers in registration order from seq `from_seq` on;
  // `next_seq` is where the next page starts (0: none).
  std::vector<v1::Worker> list_workers(uint64_t from_seq, size_t size, uint64_t& next_seq);
  // How many workers are in each state (states without any absent).
  std::map<v1::WorkerState, int> count_workers();
  // The metrics address and hostname of each worker that is not LOST and
  // has a metrics address: what Prometheus scrapes.
  std::vector<std::pair<std::string, std::string>> scrape_targets();

 private:
  struct Rank {
    std::string worker_id;
    RankState state = RankState::kRunning;  // rank_state.h
    ReportedSummary summary;                // once kSucceeded
  };
  // How an attempt ends, once decided (AttemptState::kEnding): kept until
  // the job's state change commits (a locked database fails it for a
  // while; the tick retries).
  struct Ending {
    bool succeeded = false;
    bool preempted = false;      // stopped for a higher-priority job: requeued, no restart spent
    bool spends_restart = true;  // false: a rank never started; requeued, no restart spent
    std::string cause;           // of a failure, or how a preemption ended
    std::string summary_json;    // of a success
    bool queued = false;         // its store write waits in writes_
    bool reported = false;       // a failed commit was logged
  };
  struct Attempt {
    int32_t attempt = 0;
    AttemptState state = AttemptState::kRunning;  // attempt_state.h
    std::vector<Rank> ranks;
    int64_t max_restarts = 0;
    int64_t last_progress_ms = 0;   // when rank 0's progress was last stored
    int64_t recover_until_ms = 0;   // after a restart: ranks must be back by then; 0: are back
    std::optional<Ending> ending;   // set on entering kEnding
    v1::Progress progress;          // rank 0's latest
    bool progress_stored = true;    // `progress` is in the store
    int64_t step_changed_ms = 0;    // when rank 0 last reported a new step or eval batch
    double step_ms = 0;             // recent time per step (moving average); 0: unknown
    int64_t started_ms = 0;         // when it started (or was taken over after a restart)
    int64_t first_step_due_ms = 0;  // rank 0's first step is overdue after this
    // While kPreempting: when its ranks are stopped anyway, and for whom.
    int64_t preempt_deadline_ms = 0;
    std::string preempted_for;
  };
  // What an event brings besides itself; each action reads its part.
  struct EventDetails {
    std::string reason;            // told to the ranks stopped; a preemption's cause
    std::optional<Ending> ending;  // for an event that ends the attempt
    std::string spec_json;         // kStartCommitted: what the tasks run
    std::optional<double> min_loss_scale;
  };
  // A store write a decision made: `commit` does the I/O, without mu_, and
  // reads nothing guarded by it; `then` (may be empty) runs under mu_ with
  // its status.
  struct StoreWrite {
    std::function<absl::Status()> commit;
    std::function<void(const absl::Status&)> then;
  };

  void run();
  // Queues a store write (see StoreWrite) and wakes the scheduling thread.
  void queue_write_locked(StoreWrite write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues replacing the job's message (why it still waits).
  void queue_message_locked(const std::string& job_id, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits the queued writes in order, each `then` after its commit.
  // Only the scheduling thread calls it.
  void commit_writes() ABSL_LOCKS_EXCLUDED(mu_);
  // The store's active jobs, each with its needs (from needs_, or read
  // from the store for a job seen for the first time). Reads the store
  // without holding mu_.
  absl::StatusOr<std::vector<JobRecord>> read_active_jobs() ABSL_LOCKS_EXCLUDED(mu_);
  // The worker `worker_id` if `secret` is its own (errors as above).
  absl::StatusOr<WorkerEntry*> authenticate_locked(const std::string& worker_id,
                                                   const std::string& secret)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the worker `worker_id`: its entry, queued commands and secret.
  void forget_worker_locked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A JOINING worker that has heartbeated and opened its stream becomes IDLE.
  void promote_locked(WorkerEntry& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool should_wake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return dirty_ || stopping_ || !writes_.empty();
  }
  void tick_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pass over `jobs` (read_active_jobs, read before the lock was taken).
  void schedule_locked(const std::vector<JobRecord>& jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what is remembered of jobs no longer in `active` (they ended).
  void forget_ended_jobs_locked(const std::vector<JobRecord>& active)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `job` on `workers` with `configuration`: holds the workers,
  // queues the job's move to RUNNING and, once that committed, sends its
  // tasks the job's spec with the `auto` keys chosen so.
  void start_attempt_locked(const JobRecord& job, const JobNeeds& needs,
                            const plan::RankConfiguration& configuration,
                            const std::vector<WorkerEntry*>& workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens the rendezvous scope of `attempt` (just committed as started)
  // and sends each rank its task with `spec_json`.
  void send_starts_locked(const std::string& job_id, const Attempt& attempt,
                          const std::string& spec_json, std::optional<double> min_loss_scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the attempt of `job_id` by `event` (attempt_state.h) and takes
  // the move's actions; an event its state does not allow is logged and
  // changes nothing. Nothing for a job without an attempt.
  void dispatch_locked(const std::string& job_id, AttemptEvent event, EventDetails details = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the running attempt of `job_id` as failed because of `cause`
  // (unless its end was decided before): cancels its other ranks, then
  // requeues or fails the job; without `spends_restart` (a rank never
  // started) it is requeued and no restart is counted.
  void fail_attempt_locked(const std::string& job_id, const std::string& cause,
                           bool spends_restart = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void succeed_locked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the move of `job_id` to PREEMPTED (kQueuePreempt); once it
  // committed its ranks are asked to stop.
  void queue_preempt_locked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the workers held for the ranks of `attempt` (never started).
  void release_workers_locked(const std::string& job_id, const Attempt& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts no job below the priority of the highest one waiting that
  // preemption makes room for, and preempts what that takes.
  void preempt_for_waiting_locked(const std::vector<JobRecord>& active,
                                  const std::vector<QueuedJob>& queued,
                                  std::vector<Placement>& placements,
                                  const std::vector<const v1::Worker*>& workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the store write of the decided ending of `job_id`'s attempt;
  // once it committed the attempt is forgotten, and when it fails the
  // attempt is kept and the tick queues it again.
  void queue_ending_locked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells each rank of `job_id`'s attempt still running to stop
  // (`reason`), frees or schedules the release of its worker, drops the
  // rendezvous scope.
  void stop_ranks_locked(const std::string& job_id, const std::string& reason,
                         bool free_workers_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `entry` as ListWorkers shows it: its threads those a rank placed there
  // now would get.
  v1::Worker listed_locked(const WorkerEntry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // " (after attempt N failed: ...)" for a restarted job, else "".
  std::string after_failure_locked(const std::string& job_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Attempt `number` of `job_id` while it is still the job's attempt in
  // flight (a store write's continuation finds it gone once it ended), or
  // nullptr.
  Attempt* attempt_numbered_locked(const std::string& job_id, int32_t number)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt running `task` on `worker_id`, or nullptr.
  Attempt* attempt_of_locked(const v1::RunningTask& task, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank that stopped without an outcome (`how`): fails its attempt
  // (spending a restart only when the worker had acknowledged the task),
  // or just frees the worker when the job no longer runs.
  void task_vanished_locked(WorkerEntry& worker, const std::string& how)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `worker` still runs `task`, of no running attempt, and was told to stop
  // it: it stays BUSY with it until its heartbeats no longer list it (or
  // one worker timeout passed), so that no new rank is handed to a worker
  // still stopping one (it would refuse, failing that attempt at once).
  void drain_locked(WorkerEntry& worker, const v1::RunningTask& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void send_cancel_locked(const std::string& worker_id, const std::string& job_id, int32_t attempt,
                          const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobDatabase* const database_;
  WorkerSecrets* const secrets_;
  RendezvousStore* const rendezvous_;
  TaskOutbox* const outbox_;
  CoordinatorMetrics* const metrics_;
  const SchedulerOptions options_;

  absl::Mutex mu_;
  WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Attempt> running_ ABSL_GUARDED_BY(mu_);  // by job id
  // The cause of the latest failed attempt of a requeued job, shown in its
  // messages until it finishes (the events keep every cause).
  std::map<std::string, std::string> last_failure_ ABSL_GUARDED_BY(mu_);
  // When a requeued job may start again: restarts back off exponentially,
  // so a job failing at once does not spend every restart in a second.
  std::map<std::string, int64_t> restart_at_ms_ ABSL_GUARDED_BY(mu_);
  // What each active job needs, read once (a spec never changes), so that
  // a pass over thousands of queued jobs reads no spec (issue 29); nullopt
  // for one whose stored spec no longer parses.
  std::map<std::string, std::optional<JobNeeds>> needs_ ABSL_GUARDED_BY(mu_);
  // Decided store writes, oldest first (StoreWrite).
  std::deque<StoreWrite> writes_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = true;  // something to schedule
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// "<job id>/<attempt>": the Store namespace of one attempt.
std::string rendezvous_scope(const std::string& job_id, int32_t attempt);

}  // namespace mixtrain::server
