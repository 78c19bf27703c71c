// Why: see scheduler.h. One lock guards workers and attempts, so each
// decision sees both consistently; the outbox and the rendezvous store
// (memory only) are called under it, their locks always taken after this
// one. The store never is: the scheduling thread reads it before taking
// the lock and commits the queued writes after releasing it.
#include "server/scheduler.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>

#include "engine/common/error.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "net/service_timing.h"
#include "proto/training_device.h"
#include "server/ids.h"
#include "server/job_proto.h"
#include "server/placement.h"
#include "server/summary_merge.h"

namespace mixtrain::server {
namespace {

// CPU time this thread has used.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

// Moves the state of the rank on `worker_id` by `event`; false (logged,
// nothing changed) when the state does not allow it.
bool move_rank(RankState& state, RankEvent event, const std::string& worker_id) {
  const std::optional<RankState> next = next_rank_state(state, event);
  if (!next) {
    std::cerr << "mixtrain-coordinator: the rank on worker " << worker_id << " cannot be "
              << rank_event_name(event) << " when " << rank_state_name(state) << "; ignored"
              << std::endl;
    return false;
  }
  state = *next;
  return true;
}

bool is_final_outcome(v1::TaskOutcome outcome) {
  return outcome == v1::TASK_OUTCOME_SUCCEEDED || outcome == v1::TASK_OUTCOME_FAILED ||
         outcome == v1::TASK_OUTCOME_CANCELLED || outcome == v1::TASK_OUTCOME_PREEMPTED;
}

// Rank `rank` of attempt `attempt` of `job_id`, as a worker holds it.
v1::RunningTask rank_task(const std::string& job_id, int32_t attempt, size_t rank) {
  v1::RunningTask task;
  task.set_job_id(job_id);
  task.set_attempt(attempt);
  task.set_rank(int32_t(rank));
  return task;
}

std::string describe_rank(int rank, const std::string& worker_id) {
  return "rank " + std::to_string(rank) + " on worker " + worker_id;
}

absl::Status wrong_secret(const std::string& worker_id) {
  return absl::PermissionDeniedError("wrong credentials for worker '" + worker_id + "'");
}

// A rank stepping no more for this many of its recent step times (and at
// least the stall timeout) is hung: evaluation and checkpoints take a few.
constexpr double kStallSteps = 20;

// How long the job waits before its `restart`th start (1-based): 1 s,
// doubling, at most 60 s.
int64_t restart_backoff_ms(int64_t restart) {
  return std::min<int64_t>(60'000, int64_t{1'000} << std::min<int64_t>(restart - 1, 6));
}

}  // namespace

std::string rendezvous_scope(const std::string& job_id, int32_t attempt) {
  return job_id + "/" + std::to_string(attempt);
}

Scheduler::Scheduler(JobDatabase* database, WorkerSecrets* secrets, RendezvousStore* rendezvous,
                     TaskOutbox* outbox, CoordinatorMetrics* metrics, SchedulerOptions options)
    : database_(database),
      secrets_(secrets),
      rendezvous_(rendezvous),
      outbox_(outbox),
      metrics_(metrics),
      options_(std::move(options)) {}

absl::Status Scheduler::start() {
  absl::StatusOr<std::vector<JobRecord>> jobs = read_active_jobs();
  if (!jobs.ok()) return jobs.status();
  {
    absl::MutexLock lock(&mu_);
    // Agents retry and their channels reconnect within net::kReconnectCap,
    // so a live worker is back within one timeout plus the margin.
    const int64_t deadline =
        now_unix_ms() + options_.worker_timeout.count() + net::kRestartReconnectMargin.count();
    for (const JobRecord& job : *jobs) {
      if (job.state != v1::JOB_STATE_RUNNING && job.state != v1::JOB_STATE_PREEMPTED) continue;
      Attempt& attempt = running_[job.id];
      attempt.attempt = job.attempt;
      attempt.state = job.state == v1::JOB_STATE_PREEMPTED ? AttemptState::kPreempting
                                                           : AttemptState::kRecovering;
      attempt.max_restarts = job.needs ? job.needs->max_restarts : 0;
      attempt.recover_until_ms = deadline;
      attempt.started_ms = job.updated_unix_ms;
      attempt.first_step_due_ms = deadline + options_.first_step_timeout.count();
      if (job.state == v1::JOB_STATE_PREEMPTED) {  // its ranks were asked before the restart
        attempt.preempt_deadline_ms = deadline + options_.preempt_grace.count();
        attempt.preempted_for = "a job of a higher priority";
      }
      for (const std::string& worker_id : job.workers) {
        attempt.ranks.push_back({.worker_id = worker_id, .state = RankState::kAway});
      }
    }
  }
  thread_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void Scheduler::stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Scheduler::wake() {
  absl::MutexLock lock(&mu_);
  dirty_ = true;
}

int Scheduler::heartbeat_interval_ms() const {
  return static_cast<int>(std::max<int64_t>(200, options_.worker_timeout.count() / 5));
}

void Scheduler::run() {
  // Timeouts are checked a few times per worker timeout; changes wake the
  // loop at once through dirty_, and queued writes through writes_ (those
  // alone are committed without a pass).
  const absl::Duration tick =
      absl::Milliseconds(std::clamp<int64_t>(options_.worker_timeout.count() / 10, 20, 1000));
  absl::Time next_pass = absl::InfinitePast();
  while (true) {
    bool pass = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(this, &Scheduler::should_wake), next_pass);
      if (stopping_) break;
      pass = dirty_ || absl::Now() >= next_pass;
      if (pass) dirty_ = false;  // before the read: a change during it wakes another pass
    }
    if (!pass) {
      commit_writes();
      continue;
    }
    next_pass = absl::Now() + tick;
    const double cpu_before = thread_cpu_seconds();
    const absl::StatusOr<std::vector<JobRecord>> jobs = read_active_jobs();
    {
      absl::MutexLock lock(&mu_);
      tick_locked();
      if (jobs.ok()) schedule_locked(*jobs);
    }
    commit_writes();
    metrics_->scheduler_pass(thread_cpu_seconds() - cpu_before);
  }
  commit_writes();  // what was decided before the stop
}

void Scheduler::queue_write_locked(StoreWrite write) { writes_.push_back(std::move(write)); }

void Scheduler::commit_writes() {
  while (true) {
    StoreWrite write;
    {
      absl::MutexLock lock(&mu_);
      if (writes_.empty()) return;
      write = std::move(writes_.front());
      writes_.pop_front();
    }
    const absl::Status status = write.commit();
    if (write.then) {
      absl::MutexLock lock(&mu_);
      write.then(status);
    }
  }
}

void Scheduler::queue_message_locked(const std::string& job_id, const std::string& message) {
  queue_write_locked({.commit = [database = database_, job_id, message] {
    return database->set_message(job_id, message);
  }});
}

absl::StatusOr<std::vector<JobRecord>> Scheduler::read_active_jobs() {
  absl::StatusOr<std::vector<JobRecord>> jobs = database_->list_active_jobs();
  if (!jobs.ok()) return jobs.status();
  std::vector<std::string> unknown;
  {
    absl::MutexLock lock(&mu_);
    for (const JobRecord& job : *jobs) {
      if (!needs_.contains(job.id)) unknown.push_back(job.id);
    }
  }
  std::map<std::string, std::optional<JobNeeds>> read;
  for (const std::string& id : unknown) {
    absl::StatusOr<std::optional<JobNeeds>> stored = database_->stored_needs(id);
    if (!stored.ok()) return stored.status();
    read.emplace(id, std::move(*stored));
  }
  absl::MutexLock lock(&mu_);
  for (JobRecord& job : *jobs) {
    auto known = needs_.find(job.id);
    if (known == needs_.end()) known = needs_.emplace(job.id, read[job.id]).first;
    job.needs = known->second;
  }
  return jobs;
}

void Scheduler::tick_locked() {
  const int64_t now = now_unix_ms();
  for (WorkerEntry* worker : workers_.expire(now, options_.worker_timeout.count(), dirty_)) {
    outbox_->clear(worker->worker.id());
    if (worker->worker.has_task()) {
      task_vanished_locked(*worker, "was lost (no heartbeat for " +
                                        std::to_string(options_.worker_timeout.count()) + " ms)");
    }
  }
  for (const std::string& id : workers_.lost_ids(now - options_.worker_timeout.count() -
                                                 options_.lost_worker_retention.count())) {
    forget_worker_locked(id);
    dirty_ = true;
  }
  std::vector<std::pair<std::string, std::string>> to_fail;  // job id, cause
  std::vector<std::string> returned;                         // every rank back after a restart
  for (auto& [job_id, attempt] : running_) {
    const bool live = attempt.state == AttemptState::kRunning ||
                      attempt.state == AttemptState::kRecovering ||
                      attempt.state == AttemptState::kPreempting;
    if (attempt.step_changed_ms == 0 && live && now > attempt.first_step_due_ms) {
      to_fail.emplace_back(job_id, "made no progress: rank 0 reported no step within " +
                                       std::to_string(options_.first_step_timeout.count() / 1000) +
                                       " s of the attempt's start (--first-step-timeout-seconds)");
      continue;
    }
    const double stall_ms =
        std::max(double(options_.stall_timeout.count()), kStallSteps * attempt.step_ms);
    if (attempt.step_ms > 0 && live && now - attempt.step_changed_ms > stall_ms) {
      char detail[96];
      std::snprintf(detail, sizeof(detail), " for %.0f s (its recent step time: %.3g s)",
                    double(now - attempt.step_changed_ms) / 1e3, attempt.step_ms / 1e3);
      to_fail.emplace_back(job_id, "made no progress: rank 0 reported no step after step " +
                                       std::to_string(attempt.progress.step()) + detail);
      continue;
    }
    if (attempt.recover_until_ms == 0) continue;
    const auto missing =
        std::find_if(attempt.ranks.begin(), attempt.ranks.end(),
                     [](const Rank& rank) { return rank.state == RankState::kAway; });
    if (missing == attempt.ranks.end()) {
      attempt.recover_until_ms = 0;
      if (attempt.state == AttemptState::kRecovering) returned.push_back(job_id);
    } else if (now >= attempt.recover_until_ms) {
      to_fail.emplace_back(job_id,
                           describe_rank(int(missing - attempt.ranks.begin()), missing->worker_id) +
                               " did not come back after the coordinator restarted");
    }
  }
  for (const std::string& job_id : returned) dispatch_locked(job_id, AttemptEvent::kRanksReturned);
  for (const auto& [job_id, cause] : to_fail) fail_attempt_locked(job_id, cause);
  std::vector<std::string> overdue;  // preempted, and not stopped in time
  for (const auto& [job_id, attempt] : running_) {
    if (attempt.state == AttemptState::kPreempting && now >= attempt.preempt_deadline_ms)
      overdue.push_back(job_id);
  }
  for (const std::string& job_id : overdue) {
    dispatch_locked(
        job_id, AttemptEvent::kGraceExpired,
        {.reason = "preempted, and not stopped in time",
         .ending = Ending{.preempted = true,
                          .cause = "its ranks did not checkpoint within " +
                                   std::to_string(options_.preempt_grace.count() / 1000) +
                                   " s and were stopped; it resumes from its last "
                                   "checkpoint"}});
  }
  // Endings whose write failed (a locked database) are tried again.
  for (const auto& [job_id, attempt] : running_) {
    if (attempt.state == AttemptState::kEnding && !attempt.ending->queued)
      queue_ending_locked(job_id);
  }
}

void Scheduler::forget_ended_jobs_locked(const std::vector<JobRecord>& active) {
  std::set<std::string> ids;
  for (const JobRecord& job : active) ids.insert(job.id);
  const auto ended = [&](const auto& entry) { return !ids.contains(entry.first); };
  std::erase_if(last_failure_, ended);
  std::erase_if(restart_at_ms_, ended);
  std::erase_if(needs_, ended);
}

void Scheduler::schedule_locked(const std::vector<JobRecord>& jobs) {
  forget_ended_jobs_locked(jobs);
  std::vector<QueuedJob> queued;
  std::map<std::string, const JobRecord*> by_id;
  for (const JobRecord& job : jobs) {
    if (job.state != v1::JOB_STATE_QUEUED || running_.contains(job.id)) continue;
    std::string message;
    if (!job.needs) {
      message = "the stored spec no longer parses";
    } else if (const auto restart = restart_at_ms_.find(job.id); restart != restart_at_ms_.end()) {
      const int64_t wait_ms = restart->second - now_unix_ms();
      if (wait_ms > 0) {
        message = "restarting in " + std::to_string((wait_ms + 999) / 1000) + " s (backoff)" +
                  after_failure_locked(job.id);
      }
    }
    if (!message.empty()) {
      if (job.message != message) queue_message_locked(job.id, message);
      continue;
    }
    queued.push_back({job.id, *job.needs});
    by_id[job.id] = &job;
  }
  // Higher priorities first; oldest first within one (the store's order).
  std::stable_sort(queued.begin(), queued.end(), [](const QueuedJob& a, const QueuedJob& b) {
    return a.needs.priority > b.needs.priority;
  });
  const std::vector<WorkerEntry*> entries = workers_.all();
  std::vector<const v1::Worker*> workers;
  for (const WorkerEntry* entry : entries) workers.push_back(&entry->worker);
  std::vector<Placement> placements = place_jobs(queued, workers);
  preempt_for_waiting_locked(jobs, queued, placements, workers);
  for (const Placement& placement : placements) {
    const JobRecord& job = *by_id.at(placement.job_id);
    if (!placement.workers.empty()) {
      std::vector<WorkerEntry*> chosen;
      for (size_t i : placement.workers) chosen.push_back(entries[i]);
      start_attempt_locked(job, *job.needs, job.needs->configurations.at(placement.configuration),
                           chosen);
      continue;
    }
    const std::string message = placement.wait_reason + after_failure_locked(job.id);
    if (job.message != message) queue_message_locked(job.id, message);
  }
}

void Scheduler::preempt_for_waiting_locked(const std::vector<JobRecord>& active,
                                           const std::vector<QueuedJob>& queued,
                                           std::vector<Placement>& placements,
                                           const std::vector<const v1::Worker*>& workers) {
  std::map<std::string, size_t> index;  // worker id -> its place in `workers`
  for (size_t i = 0; i < workers.size(); ++i) index[workers[i]->id()] = i;
  std::vector<RunningJob> running;
  for (const JobRecord& record : active) {
    const auto attempt = running_.find(record.id);
    // Running (all its ranks back or not), or stopping already.
    if (!record.needs || attempt == running_.end() ||
        attempt->second.state == AttemptState::kPlacing ||
        attempt->second.state == AttemptState::kEnding) {
      continue;
    }
    RunningJob entry{.id = record.id,
                     .priority = record.needs->priority,
                     .preemptible = record.needs->preemptible,
                     .stopping = attempt->second.state == AttemptState::kPreempting,
                     .started_unix_ms = attempt->second.started_ms};
    for (const Rank& rank : attempt->second.ranks) {
      if (const auto found = index.find(rank.worker_id); found != index.end())
        entry.workers.push_back(found->second);
    }
    running.push_back(std::move(entry));
  }
  // The waiting jobs in priority order: the first that preemption can make
  // room for gets it; one that could not start even then (it asks for more
  // workers than are registered, or they run jobs it may not preempt)
  // holds back nobody.
  std::vector<bool> taken(workers.size());  // by the jobs placed before the one weighed
  for (auto waiting = placements.begin(); waiting != placements.end(); ++waiting) {
    if (!waiting->workers.empty()) {
      for (size_t i : waiting->workers) taken[i] = true;
      continue;
    }
    const QueuedJob& job = queued[size_t(waiting - placements.begin())];
    const Preemption preemption = plan_preemption(job, running, workers, taken);
    if (!preemption.fits) continue;
    // Room is being made for it: no job of a lower priority takes that room.
    for (auto it = waiting + 1; it != placements.end(); ++it) {
      if (queued[size_t(it - placements.begin())].needs.priority < job.needs.priority &&
          !it->workers.empty()) {
        it->workers.clear();
        it->wait_reason = "waiting behind job " + job.id + " (priority " +
                          std::to_string(job.needs.priority) + "), for which jobs are preempted";
      }
    }
    for (const std::string& victim : preemption.victims)
      dispatch_locked(victim, AttemptEvent::kPreemptDecided,
                      {.reason = "preempted for job " + job.id + " (priority " +
                                 std::to_string(job.needs.priority) + ")"});
    return;
  }
}

void Scheduler::queue_preempt_locked(const std::string& job_id) {
  const Attempt& attempt = running_.at(job_id);
  queue_write_locked(
      {.commit =
           [database = database_, job_id, reason = attempt.preempted_for] {
             return database
                 ->transition(job_id, v1::JOB_STATE_PREEMPTED,
                              reason + ": checkpointing at the next step boundary, then stopping")
                 .status();
           },
       .then =
           [this, job_id, number = attempt.attempt](const absl::Status& status) {
             if (attempt_numbered_locked(job_id, number) == nullptr) return;
             if (status.ok()) metrics_->job_preempted();
             // Refused, it still runs: a later pass may preempt it again.
             dispatch_locked(job_id, status.ok() ? AttemptEvent::kPreemptCommitted
                                                 : AttemptEvent::kPreemptRefused);
           }});
}

void Scheduler::start_attempt_locked(const JobRecord& job, const JobNeeds& needs,
                                     const plan::RankConfiguration& configuration,
                                     const std::vector<WorkerEntry*>& workers) {
  const int32_t number = job.attempt + 1;  // what its move to RUNNING makes it
  Attempt& attempt = running_[job.id];
  attempt = Attempt{.attempt = number,
                    .state = AttemptState::kPlacing,
                    .max_restarts = needs.max_restarts,
                    .first_step_due_ms = std::numeric_limits<int64_t>::max()};
  TransitionDetails details;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    WorkerEntry& worker = *workers[rank];
    details.workers.push_back(worker.worker.id());
    attempt.ranks.push_back({.worker_id = worker.worker.id()});
    // No other job gets it meanwhile.
    WorkerRegistry::assign(worker, rank_task(job.id, number, rank));
  }
  // Filled by the commit (outside the lock), read by what follows it.
  struct Started {
    std::string spec_json;
    double queued_seconds = -1;  // since its latest event; < 0: unknown
  };
  auto started = std::make_shared<Started>();
  queue_write_locked(
      {.commit = [database = database_, job_id = job.id, number, choice = configuration.choice,
                  details, started,
                  after_failure = after_failure_locked(job.id)]() mutable -> absl::Status {
         const absl::StatusOr<JobRecord> stored = database->get_job(job_id);  // with its spec
         if (!stored.ok()) return stored.status();
         started->spec_json = stored->spec_json;
         try {
           const config::JobSpec spec = config::job_spec_from_json(parse_json(stored->spec_json));
           if (spec.auto_keys.any()) {
             details.configuration = plan::describe_auto(choice, spec.auto_keys);
             started->spec_json =
                 dump_json(config::job_spec_to_json(plan::with_choice(spec, choice)));
           }
         } catch (const EngineError& e) {  // validated at submit: only a damaged store
           const std::string message = std::string("the stored spec no longer parses: ") + e.what();
           database->set_message(job_id, message).IgnoreError();
           return absl::FailedPreconditionError(message);
         }
         const absl::StatusOr<std::vector<JobEventRecord>> events = database->events(job_id);
         const size_t count = details.workers.size();
         absl::StatusOr<JobRecord> moved = database->transition(
             job_id, v1::JOB_STATE_RUNNING,
             "started on " + std::to_string(count) + " worker" + (count == 1 ? "" : "s") +
                 (details.configuration.empty() ? ""
                                                : " with " + details.configuration + " (auto)") +
                 after_failure,
             details);
         if (!moved.ok()) return moved.status();
         if (events.ok() && !events->empty())
           started->queued_seconds = (now_unix_ms() - events->back().unix_ms) / 1e3;
         if (moved->attempt != number) {  // another coordinator wrote the store meanwhile
           return absl::AbortedError("job " + job_id + " started as attempt " +
                                     std::to_string(moved->attempt) + ", not " +
                                     std::to_string(number));
         }
         return absl::OkStatus();
       },
       .then =
           [this, job_id = job.id, number, started,
            min_loss_scale = needs.min_loss_scale](const absl::Status& status) {
             Attempt* attempt = attempt_numbered_locked(job_id, number);
             if (attempt == nullptr) return;  // cancelled meanwhile
             if (status.ok() && attempt->state == AttemptState::kPlacing) {
               if (started->queued_seconds >= 0) metrics_->job_started(started->queued_seconds);
               attempt->started_ms = now_unix_ms();
               attempt->first_step_due_ms =
                   attempt->started_ms + options_.first_step_timeout.count();
             }
             dispatch_locked(
                 job_id, status.ok() ? AttemptEvent::kStartCommitted : AttemptEvent::kStartRefused,
                 {.spec_json = started->spec_json, .min_loss_scale = min_loss_scale});
           }});
}

void Scheduler::send_starts_locked(const std::string& job_id, const Attempt& attempt,
                                   const std::string& spec_json,
                                   std::optional<double> min_loss_scale) {
  const std::string scope = rendezvous_scope(job_id, attempt.attempt);
  rendezvous_->open_scope(scope, int64_t(attempt.ranks.size()));
  for (size_t rank = 0; rank < attempt.ranks.size(); ++rank) {
    WorkerEntry* worker = workers_.find(attempt.ranks[rank].worker_id);
    if (worker == nullptr) continue;  // forgotten meanwhile, which failed the attempt
    v1::TaskCommand command;
    v1::Task& task = *command.mutable_start();
    task.set_job_id(job_id);
    task.set_attempt(attempt.attempt);
    task.set_rank(int32_t(rank));
    task.set_world_size(int32_t(attempt.ranks.size()));
    task.set_spec_json(spec_json);
    task.set_rendezvous_scope(scope);
    task.set_checkpoint_dir((std::filesystem::path(options_.checkpoint_root) / job_id).string());
    task.set_resume(attempt.attempt > 1);
    task.set_data_root(options_.data_root);
    if (min_loss_scale) task.set_min_loss_scale(*min_loss_scale);
    task.set_threads(workers_.rank_threads(*worker));
    outbox_->send(worker->worker.id(), std::move(command));
  }
}

std::string Scheduler::after_failure_locked(const std::string& job_id) const {
  const auto failure = last_failure_.find(job_id);
  return failure == last_failure_.end() ? "" : " (after " + failure->second + ")";
}

Scheduler::Attempt* Scheduler::attempt_numbered_locked(const std::string& job_id, int32_t number) {
  const auto it = running_.find(job_id);
  return it == running_.end() || it->second.attempt != number ? nullptr : &it->second;
}

Scheduler::Attempt* Scheduler::attempt_of_locked(const v1::RunningTask& task,
                                                 const std::string& worker_id) {
  Attempt* attempt = attempt_numbered_locked(task.job_id(), task.attempt());
  if (attempt == nullptr || task.rank() < 0 || size_t(task.rank()) >= attempt->ranks.size() ||
      attempt->ranks[task.rank()].worker_id != worker_id) {
    return nullptr;
  }
  return attempt;
}

void Scheduler::send_cancel_locked(const std::string& worker_id, const std::string& job_id,
                                   int32_t attempt, const std::string& reason) {
  v1::TaskCommand command;
  command.mutable_cancel()->set_job_id(job_id);
  command.mutable_cancel()->set_attempt(attempt);
  command.mutable_cancel()->set_reason(reason);
  outbox_->send(worker_id, std::move(command));
}

void Scheduler::stop_ranks_locked(const std::string& job_id, const std::string& reason,
                                  bool free_workers_now) {
  const auto it = running_.find(job_id);
  if (it == running_.end()) return;
  const Attempt& attempt = it->second;
  for (size_t rank = 0; rank < attempt.ranks.size(); ++rank) {
    WorkerEntry* worker = workers_.find(attempt.ranks[rank].worker_id);
    if (worker == nullptr || !worker->worker.has_task()) continue;
    if (!same_task(worker->worker.task(), rank_task(job_id, attempt.attempt, rank))) continue;
    if (worker->worker.state() != v1::WORKER_STATE_LOST) {
      send_cancel_locked(worker->worker.id(), job_id, attempt.attempt, reason);
    }
    if (free_workers_now || worker->worker.state() == v1::WORKER_STATE_LOST) {
      WorkerRegistry::release(*worker);
    } else {
      WorkerRegistry::stop(*worker, now_unix_ms() + options_.worker_timeout.count());
    }
  }
  rendezvous_->drop_scope(rendezvous_scope(job_id, attempt.attempt));
  dirty_ = true;
}

void Scheduler::release_workers_locked(const std::string& job_id, const Attempt& attempt) {
  for (size_t rank = 0; rank < attempt.ranks.size(); ++rank) {
    WorkerEntry* worker = workers_.find(attempt.ranks[rank].worker_id);
    if (worker != nullptr && worker->worker.has_task() &&
        same_task(worker->worker.task(), rank_task(job_id, attempt.attempt, rank))) {
      WorkerRegistry::release(*worker);
    }
  }
  dirty_ = true;
}

void Scheduler::dispatch_locked(const std::string& job_id, AttemptEvent event,
                                EventDetails details) {
  const auto it = running_.find(job_id);
  if (it == running_.end()) return;
  Attempt& attempt = it->second;
  const std::optional<AttemptMove> move = next_attempt_move(attempt.state, event);
  if (!move) {
    std::cerr << "mixtrain-coordinator: the attempt of job " << job_id << " cannot be "
              << attempt_event_name(event) << " when " << attempt_state_name(attempt.state)
              << "; ignored" << std::endl;
    return;
  }
  if (move->to == AttemptState::kEnding && attempt.state != AttemptState::kEnding) {
    attempt.ending = details.ending;
  }
  attempt.state = move->to;
  for (const AttemptAction action : move->actions) {
    switch (action) {
      case AttemptAction::kSendStarts:
        send_starts_locked(job_id, attempt, details.spec_json, details.min_loss_scale);
        break;
      case AttemptAction::kReleaseWorkers:
        release_workers_locked(job_id, attempt);
        break;
      case AttemptAction::kQueuePreempt:
        // Stopping from now on, so that no pass preempts it again.
        attempt.preempt_deadline_ms = now_unix_ms() + options_.preempt_grace.count();
        attempt.preempted_for = details.reason;
        queue_preempt_locked(job_id);
        break;
      case AttemptAction::kSendPreempts:
        for (const Rank& rank : attempt.ranks) {
          v1::TaskCommand command;
          command.mutable_preempt()->set_job_id(job_id);
          command.mutable_preempt()->set_attempt(attempt.attempt);
          command.mutable_preempt()->set_reason(attempt.preempted_for);
          outbox_->send(rank.worker_id, std::move(command));
        }
        break;
      case AttemptAction::kCancelPreempt:
        attempt.preempt_deadline_ms = 0;
        attempt.preempted_for.clear();
        dirty_ = true;
        break;
      case AttemptAction::kStopRanks:
        // The ranks stay busy until they report their end (or time out), so
        // the next attempt cannot be handed to a worker still stopping one.
        stop_ranks_locked(job_id, details.reason, /*free_workers_now=*/false);
        break;
      case AttemptAction::kFreeRanks:
        stop_ranks_locked(job_id, details.reason, /*free_workers_now=*/true);
        break;
      case AttemptAction::kQueueEnding:
        queue_ending_locked(job_id);
        break;
      case AttemptAction::kForget:
        running_.erase(it);  // the last action of any move
        return;
    }
  }
}

void Scheduler::fail_attempt_locked(const std::string& job_id, const std::string& cause,
                                    bool spends_restart) {
  dispatch_locked(job_id, AttemptEvent::kFailed,
                  {.reason = "another rank failed: " + cause,
                   .ending = Ending{.spends_restart = spends_restart, .cause = cause}});
}

void Scheduler::succeed_locked(const std::string& job_id) {
  std::vector<const ReportedSummary*> summaries;
  for (const Rank& rank : running_.at(job_id).ranks) summaries.push_back(&rank.summary);
  dispatch_locked(
      job_id, AttemptEvent::kSucceeded,
      {.reason = "the job succeeded",
       .ending = Ending{.succeeded = true, .summary_json = merge_rank_summaries(summaries)}});
}

void Scheduler::queue_ending_locked(const std::string& job_id) {
  Attempt& attempt = running_.at(job_id);
  Ending& ending = *attempt.ending;
  if (ending.queued) return;
  ending.queued = true;
  const std::string failed =
      "attempt " + std::to_string(attempt.attempt) + " failed: " + ending.cause;
  // Filled by the commit: the restart the job's requeue counted (0: none).
  auto restart = std::make_shared<int32_t>(0);
  std::optional<v1::Progress> progress;
  if (!attempt.progress_stored) progress = attempt.progress;
  queue_write_locked(
      {.commit = [database = database_, job_id, ending, failed, progress, restart,
                  max_restarts = attempt.max_restarts,
                  preempted_for = attempt.preempted_for]() -> absl::Status {
         if (progress) {
           if (absl::Status stored = database->set_progress(job_id, *progress); !stored.ok())
             return stored;
         }
         if (ending.succeeded) {
           TransitionDetails details;
           details.summary_json = ending.summary_json;
           return database
               ->transition(job_id, v1::JOB_STATE_SUCCEEDED, "every rank succeeded", details)
               .status();
         }
         if (ending.preempted) {
           return database
               ->transition(job_id, v1::JOB_STATE_QUEUED, preempted_for + "; " + ending.cause)
               .status();
         }
         if (!ending.spends_restart) {
           return database
               ->transition(job_id, v1::JOB_STATE_QUEUED,
                            failed + "; requeued without spending a restart")
               .status();
         }
         const absl::StatusOr<JobRecord> job = database->get_job(job_id);
         if (!job.ok()) return job.status();
         if (job->restarts >= max_restarts) {
           return database
               ->transition(job_id, v1::JOB_STATE_FAILED,
                            failed + "; no restarts left (retries.max_restarts: " +
                                std::to_string(max_restarts) + ")")
               .status();
         }
         const absl::Status requeued =
             database
                 ->transition(job_id, v1::JOB_STATE_QUEUED,
                              failed + "; restart " + std::to_string(job->restarts + 1) + " of " +
                                  std::to_string(max_restarts),
                              TransitionDetails{.spends_restart = true})
                 .status();
         if (requeued.ok()) *restart = job->restarts + 1;
         return requeued;
       },
       .then =
           [this, job_id, number = attempt.attempt, failed, restart](const absl::Status& status) {
             Attempt* attempt = attempt_numbered_locked(job_id, number);
             if (attempt == nullptr || !attempt->ending) return;
             Ending& ending = *attempt->ending;
             ending.queued = false;
             // A job that is no longer RUNNING (cancelled meanwhile) or gone has
             // nothing left to record; any other error is retried by the tick.
             const bool settled = status.ok() ||
                                  status.code() == absl::StatusCode::kFailedPrecondition ||
                                  status.code() == absl::StatusCode::kNotFound;
             if (!settled) {
               if (!ending.reported) {
                 ending.reported = true;
                 std::cerr << "mixtrain-coordinator: cannot record the end of job " << job_id
                           << " yet (" << status << "); retrying" << std::endl;
               }
               dispatch_locked(job_id, AttemptEvent::kEndingFailed);
               return;
             }
             if (status.ok() && !ending.succeeded && !ending.preempted) {
               last_failure_[job_id] = failed;
               if (*restart > 0) {
                 metrics_->job_restarted();
                 restart_at_ms_[job_id] = now_unix_ms() + restart_backoff_ms(*restart);
               }
             }
             dirty_ = true;
             dispatch_locked(job_id, AttemptEvent::kEndingCommitted);
           }});
}

void Scheduler::drain_locked(WorkerEntry& worker, const v1::RunningTask& task) {
  WorkerRegistry::assign(worker, task);
  WorkerRegistry::acknowledge(worker);
  WorkerRegistry::stop(worker, now_unix_ms() + options_.worker_timeout.count());
  dirty_ = true;
}

void Scheduler::task_vanished_locked(WorkerEntry& worker, const std::string& how) {
  const v1::RunningTask task = worker.worker.task();
  if (attempt_of_locked(task, worker.worker.id()) == nullptr) {
    WorkerRegistry::release(worker);
    dirty_ = true;
    return;
  }
  const bool started = worker.slot.acknowledged();
  fail_attempt_locked(task.job_id(),
                      describe_rank(task.rank(), worker.worker.id()) + " " + how +
                          (started ? "" : " before it started its task"),
                      started);
  WorkerRegistry::release(worker);
}

void Scheduler::forget_worker_locked(const std::string& worker_id) {
  workers_.remove(worker_id);
  outbox_->clear(worker_id);
  queue_write_locked(
      {.commit = [secrets = secrets_, worker_id] { return secrets->forget(worker_id); },
       .then =
           [worker_id](const absl::Status& forgotten) {
             if (forgotten.ok()) return;
             std::cerr << "mixtrain-coordinator: cannot forget the secret of worker " << worker_id
                       << ": " << forgotten << std::endl;
           }});
}

void Scheduler::promote_locked(WorkerEntry& worker) {
  if (worker.worker.state() != v1::WORKER_STATE_JOINING) return;
  worker.worker.set_state(WorkerRegistry::free_state(worker));
  dirty_ = true;
}

absl::StatusOr<v1::RegisterResponse> Scheduler::register_worker(
    const v1::RegisterRequest& request) {
  std::string id = request.previous_worker_id();
  std::string secret = request.previous_worker_secret();
  const absl::Status other_credentials =
      absl::PermissionDeniedError("worker id '" + id + "' is registered with other credentials");
  // Known here, its secret is checked under the lock; else against the
  // stored hash (after a restart), read and written without the lock.
  const auto known_here = [&]() -> absl::StatusOr<bool> {
    absl::MutexLock lock(&mu_);
    const WorkerEntry* known = workers_.find(id);
    if (known != nullptr && known->secret != secret) return other_credentials;
    return known != nullptr;
  };
  absl::StatusOr<bool> known = known_here();
  if (!known.ok()) return known.status();
  if (!*known && !id.empty()) {
    const absl::StatusOr<SecretMatch> match = secrets_->check(id, secret);
    if (!match.ok()) return match.status();
    if (*match == SecretMatch::kDiffers) return other_credentials;
    if (*match == SecretMatch::kUnknownWorker) id.clear();  // never ours, or forgotten
  }
  const bool fresh = id.empty();
  if (fresh) {
    id = random_id("w-", 12);
    secret = random_id("", 16) + random_id("", 16);  // 128 random bits
    if (absl::Status saved = secrets_->save(id, secret); !saved.ok()) return saved;
  }
  absl::MutexLock lock(&mu_);
  if (const WorkerEntry* known = workers_.find(id); known != nullptr && known->secret != secret) {
    return other_credentials;  // registered meanwhile by another call
  }
  if (fresh) {
    // The same agent restarted (the same container, under compose).
    for (const std::string& lost :
         workers_.lost_ids(0, request.hostname(), request.metrics_address())) {
      forget_worker_locked(lost);
    }
  }
  WorkerEntry& worker = workers_.upsert(id, request, now_unix_ms());
  worker.secret = secret;
  const bool was_lost = worker.worker.state() == v1::WORKER_STATE_LOST;
  if (was_lost) WorkerRegistry::release(worker);
  worker.worker.set_state(worker.worker.has_task() ? v1::WORKER_STATE_BUSY
                                                   : WorkerRegistry::free_state(worker));
  outbox_->acknowledge(id, {request.running().begin(), request.running().end()});
  bool kept = !worker.worker.has_task();
  std::vector<v1::RunningTask> stale;
  for (const v1::RunningTask& task : request.running()) {
    Attempt* attempt = attempt_of_locked(task, id);
    const bool ours = worker.worker.has_task() && same_task(worker.worker.task(), task);
    if (ours) {
      kept = true;
      WorkerRegistry::acknowledge(worker);
    } else if (attempt != nullptr && !worker.worker.has_task()) {
      WorkerRegistry::assign(worker, task);
      WorkerRegistry::acknowledge(worker);
      RankState& state = attempt->ranks[task.rank()].state;
      if (state == RankState::kAway) move_rank(state, RankEvent::kReturned, id);
      kept = true;
    } else {
      send_cancel_locked(id, task.job_id(), task.attempt(), "not a running attempt");
      stale.push_back(task);
    }
  }
  // A task it acknowledged before but no longer runs ended unreported; one
  // it never acknowledged may still be waiting in its outbox.
  if (!kept && worker.slot.acknowledged()) {
    task_vanished_locked(worker, "re-registered without its task");
  }
  if (!worker.worker.has_task() && !stale.empty()) drain_locked(worker, stale.front());
  dirty_ = true;
  v1::RegisterResponse response;
  response.set_worker_id(id);
  response.set_heartbeat_interval_ms(heartbeat_interval_ms());
  response.set_worker_timeout_ms(static_cast<int32_t>(options_.worker_timeout.count()));
  response.set_worker_secret(worker.secret);
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Scheduler::heartbeat(const v1::HeartbeatRequest& request,
                                                           const std::string& secret) {
  absl::MutexLock lock(&mu_);
  v1::HeartbeatResponse response;
  WorkerEntry* worker = workers_.find(request.worker_id());
  if (worker != nullptr && worker->secret != secret) return wrong_secret(request.worker_id());
  if (worker == nullptr || worker->worker.state() == v1::WORKER_STATE_LOST) {
    response.set_reregister(true);
    return response;
  }
  worker->worker.set_last_heartbeat_unix_ms(now_unix_ms());
  worker->heartbeat_seen = true;
  promote_locked(*worker);
  outbox_->acknowledge(worker->worker.id(), {request.running().begin(), request.running().end()});
  std::set<std::pair<std::string, int32_t>> listed;
  bool lists_own_task = false;
  for (const v1::RunningTask& task : request.running()) {
    if (worker->worker.has_task() && same_task(worker->worker.task(), task)) {
      lists_own_task = true;
      continue;
    }
    listed.emplace(task.job_id(), task.attempt());
    if (worker->cancels_sent.insert({task.job_id(), task.attempt()}).second) {
      send_cancel_locked(worker->worker.id(), task.job_id(), task.attempt(),
                         "not a running attempt");
    }
    if (!worker->worker.has_task() &&
        worker->final_reported != std::make_pair(task.job_id(), task.attempt())) {
      drain_locked(*worker, task);
      lists_own_task = true;
    }
  }
  std::erase_if(worker->cancels_sent, [&](const auto& sent) { return !listed.contains(sent); });
  if (lists_own_task) {
    WorkerRegistry::acknowledge(*worker);
  } else if (worker->slot.acknowledged()) {
    task_vanished_locked(*worker, "stopped without reporting an outcome");
  }
  return response;
}

absl::StatusOr<WorkerEntry*> Scheduler::authenticate_locked(const std::string& worker_id,
                                                            const std::string& secret) {
  WorkerEntry* worker = workers_.find(worker_id);
  if (worker == nullptr) {
    return absl::NotFoundError("unknown worker '" + worker_id + "': register again");
  }
  if (worker->secret != secret) return wrong_secret(worker_id);
  return worker;
}

absl::Status Scheduler::check_worker(const std::string& worker_id, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  return authenticate_locked(worker_id, secret).status();
}

absl::Status Scheduler::open_task_stream(const std::string& worker_id, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<WorkerEntry*> worker = authenticate_locked(worker_id, secret);
  if (!worker.ok()) return worker.status();
  (*worker)->stream_opened = true;
  promote_locked(**worker);
  return absl::OkStatus();
}

absl::Status Scheduler::deregister_worker(const std::string& worker_id, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<WorkerEntry*> worker = authenticate_locked(worker_id, secret);
  if (!worker.ok()) return worker.status();
  if ((*worker)->worker.has_task()) task_vanished_locked(**worker, "left (deregistered)");
  forget_worker_locked(worker_id);
  dirty_ = true;
  return absl::OkStatus();
}

absl::Status Scheduler::check_store_access(const std::string& worker_id, const std::string& secret,
                                           const std::string& scope) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<WorkerEntry*> worker = authenticate_locked(worker_id, secret);
  if (!worker.ok()) return worker.status();
  const v1::Worker& info = (*worker)->worker;
  if (!info.has_task() || attempt_of_locked(info.task(), worker_id) == nullptr ||
      rendezvous_scope(info.task().job_id(), info.task().attempt()) != scope) {
    return absl::PermissionDeniedError(
        "worker '" + worker_id + "' holds no rank of a running attempt with scope '" + scope + "'");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ReportProgressResponse> Scheduler::report_progress(
    const v1::ReportProgressRequest& request, const std::string& secret, ReportedSummary summary) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<WorkerEntry*> authenticated =
      authenticate_locked(request.worker_id(), secret);
  if (!authenticated.ok()) return authenticated.status();
  WorkerEntry* worker = *authenticated;
  const v1::RunningTask& task = request.task();
  outbox_->acknowledge_report(request.worker_id(), task, is_final_outcome(request.outcome()));
  const bool holds = worker->worker.has_task() && same_task(worker->worker.task(), task);
  Attempt* attempt = attempt_of_locked(task, request.worker_id());
  // A rank that ended while this coordinator was down reports its outcome
  // once its agent registered again, no longer running it.
  const bool ended_while_away = !holds && attempt != nullptr && attempt->recover_until_ms != 0 &&
                                attempt->ranks[task.rank()].state == RankState::kAway &&
                                is_final_outcome(request.outcome());
  v1::ReportProgressResponse response;
  response.set_counted(holds);
  if (!holds && !ended_while_away) return response;  // a stale report of an earlier task
  worker->worker.set_last_heartbeat_unix_ms(now_unix_ms());
  if (holds) {
    WorkerRegistry::acknowledge(*worker);
    if (is_final_outcome(request.outcome())) {
      worker->final_reported = {task.job_id(), task.attempt()};
      WorkerRegistry::release(*worker);
      dirty_ = true;
    }
  }
  if (attempt == nullptr) return response;  // the job no longer runs
  Rank& rank = attempt->ranks[task.rank()];
  const int64_t now = now_unix_ms();
  if (task.rank() == 0 && request.has_progress()) {
    const int64_t steps = request.progress().step() - attempt->progress.step();
    if (steps > 0) {
      if (attempt->step_changed_ms != 0 && attempt->progress.step() > 0) {
        const double per_step = double(now - attempt->step_changed_ms) / double(steps);
        attempt->step_ms =
            attempt->step_ms == 0 ? per_step : 0.8 * attempt->step_ms + 0.2 * per_step;
      }
      attempt->step_changed_ms = now;
    } else if (steps == 0 && attempt->step_changed_ms != 0 &&
               request.progress().eval_batches_done() > attempt->progress.eval_batches_done()) {
      attempt->step_changed_ms = now;  // an evaluation under way: progress, not a step time
    }
    attempt->progress = request.progress();
    attempt->progress_stored = false;
    // Stored at most once a second while it runs; one that fails to store
    // is tried again with the next report or, at the end, before the
    // attempt's ending commits.
    if (is_final_outcome(request.outcome()) || now - attempt->last_progress_ms >= 1000) {
      attempt->last_progress_ms = now;
      queue_write_locked(
          {.commit = [database = database_, job_id = task.job_id(),
                      progress =
                          attempt->progress] { return database->set_progress(job_id, progress); },
           .then =
               [this, job_id = task.job_id(), number = attempt->attempt,
                stored = attempt->progress.SerializeAsString()](const absl::Status& status) {
                 Attempt* attempt = attempt_numbered_locked(job_id, number);
                 if (status.ok() && attempt != nullptr &&
                     attempt->progress.SerializeAsString() == stored) {
                   attempt->progress_stored = true;
                 }
               }});
    }
  }
  switch (request.outcome()) {
    case v1::TASK_OUTCOME_SUCCEEDED: {
      if (!move_rank(rank.state, RankEvent::kSucceeded, rank.worker_id)) break;
      rank.summary = std::move(summary);
      const bool all = std::all_of(attempt->ranks.begin(), attempt->ranks.end(),
                                   [](const Rank& r) { return r.state == RankState::kSucceeded; });
      if (all) succeed_locked(task.job_id());
      break;
    }
    case v1::TASK_OUTCOME_PREEMPTED: {
      if (!move_rank(rank.state, RankEvent::kPreempted, rank.worker_id)) break;
      const bool all = std::all_of(attempt->ranks.begin(), attempt->ranks.end(),
                                   [](const Rank& r) { return r.state == RankState::kPreempted; });
      if (all) {
        dispatch_locked(task.job_id(), AttemptEvent::kRanksStopped,
                        {.reason = "preempted",
                         .ending = Ending{.preempted = true,
                                          .cause = "its ranks checkpointed step " +
                                                   std::to_string(request.progress().step()) +
                                                   " and stopped; it resumes from there"}});
      }
      break;
    }
    case v1::TASK_OUTCOME_FAILED:
    case v1::TASK_OUTCOME_CANCELLED: {
      const RankEvent ended =
          request.outcome() == v1::TASK_OUTCOME_FAILED ? RankEvent::kFailed : RankEvent::kCancelled;
      if (!move_rank(rank.state, ended, rank.worker_id)) break;
      fail_attempt_locked(
          task.job_id(),
          describe_rank(task.rank(), request.worker_id()) +
              (request.outcome() == v1::TASK_OUTCOME_FAILED ? " failed" : " was cancelled") +
              (request.message().empty() ? "" : ": " + request.message()));
      break;
    }
    default:
      break;
  }
  return response;
}

absl::Status Scheduler::report_log(const v1::ReportLogRequest& request, const std::string& secret) {
  {
    absl::MutexLock lock(&mu_);
    const absl::StatusOr<WorkerEntry*> worker = authenticate_locked(request.worker_id(), secret);
    if (!worker.ok()) return worker.status();
    // Lines count only for the task the worker holds (stale ones are dropped).
    const v1::Worker& info = (*worker)->worker;
    if (!info.has_task() || !same_task(info.task(), request.task())) return absl::OkStatus();
  }
  for (const std::string& line : request.lines()) {
    if (absl::Status s = database_->append_log(request.task().job_id(), request.task().attempt(),
                                               request.task().rank(), line);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> Scheduler::cancel_job(const std::string& job_id) {
  // Committed before the lock is taken: a start or ending decided
  // meanwhile finds the job CANCELLED and changes nothing.
  absl::StatusOr<JobRecord> job =
      database_->transition(job_id, v1::JOB_STATE_CANCELLED, "cancelled by a client");
  if (!job.ok()) return job;
  absl::MutexLock lock(&mu_);
  dispatch_locked(job_id, AttemptEvent::kCancelled, {.reason = "the job was cancelled"});
  return job;
}

v1::Worker Scheduler::listed_locked(const WorkerEntry& entry) const {
  v1::Worker worker = entry.worker;
  worker.mutable_resources()->set_threads(workers_.rank_threads(entry));
  return worker;
}

std::vector<v1::Worker> Scheduler::list_workers() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Worker> workers;
  for (WorkerEntry* worker : workers_.all()) workers.push_back(listed_locked(*worker));
  return workers;
}

std::vector<v1::Worker> Scheduler::list_workers(uint64_t from_seq, size_t size,
                                                uint64_t& next_seq) {
  absl::MutexLock lock(&mu_);
  const WorkerPage page = workers_.page(from_seq, size);
  next_seq = page.next_seq;
  std::vector<v1::Worker> workers;
  for (const WorkerEntry* worker : page.entries) workers.push_back(listed_locked(*worker));
  return workers;
}

std::map<v1::WorkerState, int> Scheduler::count_workers() {
  absl::MutexLock lock(&mu_);
  std::map<v1::WorkerState, int> counts;
  for (const WorkerEntry* worker : workers_.all()) ++counts[worker->worker.state()];
  return counts;
}

std::vector<std::pair<std::string, std::string>> Scheduler::scrape_targets() {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::string>> targets;
  for (const WorkerEntry* worker : workers_.all()) {
    const v1::Worker& info = worker->worker;
    if (info.state() == v1::WORKER_STATE_LOST || info.metrics_address().empty()) continue;
    targets.emplace_back(info.metrics_address(), info.hostname());
  }
  return targets;
}

}  // namespace mixtrain::server
