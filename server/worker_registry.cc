// Why: see worker_registry.h.
#include "server/worker_registry.h"

#include <iostream>

namespace mixtrain::server {

WorkerEntry& WorkerRegistry::upsert(const std::string& id, const v1::RegisterRequest& request,
                                    int64_t now_ms) {
  auto [it, added] = workers_.try_emplace(id);
  WorkerEntry& entry = it->second;
  if (added) {
    order_.push_back(id);
    entry.worker.set_id(id);
    entry.worker.set_state(v1::WORKER_STATE_IDLE);
  }
  entry.worker.set_hostname(request.hostname());
  entry.worker.set_metrics_address(request.metrics_address());
  entry.worker.set_data_address(request.data_address());
  *entry.worker.mutable_resources() = request.resources();
  entry.worker.set_registered_unix_ms(now_ms);
  entry.worker.set_last_heartbeat_unix_ms(now_ms);
  return entry;
}

WorkerEntry* WorkerRegistry::find(const std::string& id) {
  const auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<WorkerEntry*> WorkerRegistry::all() {
  std::vector<WorkerEntry*> entries;
  for (const std::string& id : order_) entries.push_back(&workers_.at(id));
  return entries;
}

namespace {

// Moves `entry`'s slot by `event`; false (logged, nothing changed) when its
// state does not allow it.
bool move_slot(WorkerEntry& entry, SlotEvent event) {
  const std::optional<SlotState> next = next_slot_state(entry.slot.state, event);
  if (!next) {
    std::cerr << "mixtrain-coordinator: worker " << entry.worker.id() << ": cannot "
              << slot_event_name(event) << " a " << slot_state_name(entry.slot.state)
              << " task slot; ignored" << std::endl;
    return false;
  }
  entry.slot.state = *next;
  return true;
}

}  // namespace

std::vector<WorkerEntry*> WorkerRegistry::expire(int64_t now_ms, int64_t timeout_ms,
                                                 bool& changed) {
  std::vector<WorkerEntry*> lost;
  for (WorkerEntry* entry : all()) {
    v1::Worker& info = entry->worker;
    if (info.state() == v1::WORKER_STATE_LOST) continue;
    if (now_ms - info.last_heartbeat_unix_ms() > timeout_ms) {
      info.set_state(v1::WORKER_STATE_LOST);
      lost.push_back(entry);
      changed = true;
    } else if (entry->slot.stopping() && now_ms >= entry->slot.stop_deadline_ms) {
      release(*entry);
      changed = true;
    }
  }
  return lost;
}

void WorkerRegistry::assign(WorkerEntry& entry, const v1::RunningTask& task) {
  if (!move_slot(entry, SlotEvent::kAssign)) return;
  entry.worker.set_state(v1::WORKER_STATE_BUSY);
  *entry.worker.mutable_task() = task;
  entry.slot.stop_deadline_ms = 0;
}

void WorkerRegistry::acknowledge(WorkerEntry& entry) { move_slot(entry, SlotEvent::kAcknowledge); }

void WorkerRegistry::stop(WorkerEntry& entry, int64_t deadline_ms) {
  if (move_slot(entry, SlotEvent::kStop)) entry.slot.stop_deadline_ms = deadline_ms;
}

void WorkerRegistry::release(WorkerEntry& entry) {
  move_slot(entry, SlotEvent::kRelease);
  if (entry.worker.state() != v1::WORKER_STATE_LOST) entry.worker.set_state(v1::WORKER_STATE_IDLE);
  entry.worker.clear_task();
  entry.slot.stop_deadline_ms = 0;
}

bool backend_matches(config::BackendChoice choice, v1::Backend backend) {
  switch (choice) {
    case config::BackendChoice::kCpu:
      return backend == v1::BACKEND_CPU;
    case config::BackendChoice::kCuda:
      return backend == v1::BACKEND_CUDA;
    default:
      return true;
  }
}

}  // namespace mixtrain::server
