// Why: the scheduler needs to know which workers exist, what they can run
// (backend), whether they are idle, busy with a rank or lost, and when each
// was last heard from. The registry keeps that in registration order; it is
// plain data under the scheduler's lock, so one lock covers a decision that
// reads workers and attempts together.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/config/job_spec.h"
#include "proto/mixtrain.pb.h"
#include "proto/running_task.h"

namespace mixtrain::server {

struct WorkerEntry {
  v1::Worker worker;               // as ListWorkers shows it; task set while BUSY
  std::string secret;              // RegisterResponse.worker_secret: its calls carry it
  bool task_acknowledged = false;  // the task appeared in a heartbeat or report
  int64_t release_at_ms = 0;       // cancelled task: IDLE by then without a report; 0: none
  // Stale tasks (job id, attempt) this worker was told to cancel; not repeated.
  std::set<std::pair<std::string, int32_t>> cancels_sent;
  // The last task (job id, attempt) whose final outcome it reported: a
  // heartbeat sent before that report may still list it, and must not make
  // the worker hold it again.
  std::pair<std::string, int32_t> final_reported;
};

// Not thread safe: the scheduler's lock guards it.
class WorkerRegistry {
 public:
  // The worker `id` (added if new, in registration order) with the details
  // of `request`, heard from at `now_ms`; its state and task are kept.
  WorkerEntry& upsert(const std::string& id, const v1::RegisterRequest& request, int64_t now_ms);

  // nullptr for an unknown id.
  WorkerEntry* find(const std::string& id);

  // Every worker, in registration order.
  std::vector<WorkerEntry*> all();

  // Makes `entry` BUSY with `task`, not acknowledged yet.
  static void assign(WorkerEntry& entry, const v1::RunningTask& task);
  // Makes `entry` IDLE (unless LOST) without a task.
  static void release(WorkerEntry& entry);

 private:
  std::map<std::string, WorkerEntry> workers_;
  std::vector<std::string> order_;  // ids in registration order
};

// True when a worker training with `backend` may run a job asking for `choice`.
bool backend_matches(config::BackendChoice choice, v1::Backend backend);


}  // namespace mixtrain::server
