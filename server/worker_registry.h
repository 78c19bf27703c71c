// Why: the scheduler needs to know which workers exist, what they can run
// (backend), whether they are joining, idle, busy with a rank or lost, and
// when each was last heard from. The registry keeps that in registration
// order; it is plain data under the scheduler's lock, so one lock covers a
// decision that reads workers and attempts together. Lost workers leave it
// after a bound (issue 29: it once grew forever), and it is read a page at
// a time.
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
#include "server/task_slot.h"

namespace mixtrain::server {

struct WorkerEntry {
  v1::Worker worker;   // as ListWorkers shows it; task set while BUSY
  std::string secret;  // RegisterResponse.worker_secret: its calls carry it
  TaskSlot slot;       // the stage of worker.task (kFree without one)
  // Stale tasks (job id, attempt) this worker was told to cancel; not repeated.
  std::set<std::pair<std::string, int32_t>> cancels_sent;
  // The last task (job id, attempt) whose final outcome it reported: a
  // heartbeat sent before that report may still list it, and must not make
  // the worker hold it again.
  std::pair<std::string, int32_t> final_reported;
  // Since its latest registration: it heartbeated, and it opened its task
  // stream. JOINING until both (a registration that does neither must not
  // be handed tasks), IDLE once free after that.
  bool heartbeat_seen = false;
  bool stream_opened = false;
  uint64_t seq = 0;  // its place in registration order
};

// One page of workers, and the seq the next page starts at (0: the last page).
struct WorkerPage {
  std::vector<const WorkerEntry*> entries;
  uint64_t next_seq = 0;
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
  // At most `size` workers in registration order, from the first whose
  // seq is `from_seq` or later.
  WorkerPage page(uint64_t from_seq, size_t size) const;
  // Forgets the worker `id` (nothing for an unknown one).
  void remove(const std::string& id);
  // The ids of the LOST workers last heard from before `before_ms`, or
  // registered from `hostname` with `metrics_address` (when not empty).
  std::vector<std::string> lost_ids(int64_t before_ms, const std::string& hostname = "",
                                    const std::string& metrics_address = "") const;

  // The CPU threads a rank placed on `entry` now gets: the worker's own
  // (Resources.threads) when it was started with some, else its share of
  // its host: host_cores over the workers not LOST with its host_id (compose
  // --scale, several agents on one machine), at least 1 and at most the
  // cores it may use. Workers without a host_id count alone.
  int rank_threads(const WorkerEntry& entry) const;

  // Liveness, on the scheduler's tick at `now_ms`: marks LOST every worker
  // not heard from for more than `timeout_ms` and returns those (their task
  // is kept for the caller to account for), and frees every worker whose
  // stopping task passed its deadline without a report. `changed` is set
  // when any worker changed.
  std::vector<WorkerEntry*> expire(int64_t now_ms, int64_t timeout_ms, bool& changed);

  // The moves of task_slot.h; one the slot's state does not allow is
  // logged and changes nothing (the coordinator never stops over it).
  // Makes `entry` BUSY with `task`, sent and not acknowledged yet.
  static void assign(WorkerEntry& entry, const v1::RunningTask& task);
  // The worker listed its task in a heartbeat, registration or report.
  static void acknowledge(WorkerEntry& entry);
  // Its task is to stop; the worker is freed at `deadline_ms` at the latest.
  static void stop(WorkerEntry& entry, int64_t deadline_ms);
  // Makes `entry` IDLE (unless LOST, or JOINING until it heartbeated and
  // opened its task stream) without a task.
  static void release(WorkerEntry& entry);
  // The state of a worker without a task that is not lost: IDLE or JOINING.
  static v1::WorkerState free_state(const WorkerEntry& entry);

 private:
  std::map<std::string, WorkerEntry> workers_;
  std::map<uint64_t, std::string> order_;  // ids by seq: registration order
  uint64_t next_seq_ = 1;
};

// True when a worker training with `backend` may run a job asking for `choice`.
bool backend_matches(config::BackendChoice choice, v1::Backend backend);


}  // namespace mixtrain::server
