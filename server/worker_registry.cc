// Why: see worker_registry.h.
#include "server/worker_registry.h"

#include <algorithm>
#include <iostream>

namespace mixtrain::server {

WorkerEntry& WorkerRegistry::upsert(const std::string& id, const v1::RegisterRequest& request,
                                    int64_t now_ms) {
  auto [it, added] = workers_.try_emplace(id);
  WorkerEntry& entry = it->second;
  if (added) {
    entry.seq = next_seq_++;
    order_[entry.seq] = id;
    entry.worker.set_id(id);
    entry.worker.set_state(v1::WORKER_STATE_JOINING);
  }
  entry.heartbeat_seen = false;
  entry.stream_opened = false;
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
  for (const auto& [seq, id] : order_) entries.push_back(&workers_.at(id));
  return entries;
}

WorkerPage WorkerRegistry::page(uint64_t from_seq, size_t size) const {
  WorkerPage page;
  for (auto it = order_.lower_bound(from_seq); it != order_.end(); ++it) {
    if (page.entries.size() == size) {
      page.next_seq = it->first;
      break;
    }
    page.entries.push_back(&workers_.at(it->second));
  }
  return page;
}

int WorkerRegistry::rank_threads(const WorkerEntry& entry) const {
  const v1::Resources& resources = entry.worker.resources();
  if (resources.threads() > 0) return resources.threads();
  int sharing = 1;
  if (!resources.host_id().empty()) {
    sharing = 0;
    for (const auto& [id, other] : workers_) {
      if (other.worker.resources().host_id() == resources.host_id() &&
          (other.worker.state() != v1::WORKER_STATE_LOST || &other == &entry)) {
        ++sharing;
      }
    }
  }
  const int usable = std::max(1, resources.cpu_cores());
  const int host = resources.host_cores() > 0 ? resources.host_cores() : usable;
  return std::clamp(host / std::max(1, sharing), 1, usable);
}

void WorkerRegistry::remove(const std::string& id) {
  const auto it = workers_.find(id);
  if (it == workers_.end()) return;
  order_.erase(it->second.seq);
  workers_.erase(it);
}

std::vector<std::string> WorkerRegistry::lost_ids(int64_t before_ms, const std::string& hostname,
                                                  const std::string& metrics_address) const {
  std::vector<std::string> ids;
  for (const auto& [id, entry] : workers_) {
    const v1::Worker& info = entry.worker;
    if (info.state() != v1::WORKER_STATE_LOST) continue;
    const bool same_place = !metrics_address.empty() && info.hostname() == hostname &&
                            info.metrics_address() == metrics_address;
    if (info.last_heartbeat_unix_ms() < before_ms || same_place) ids.push_back(id);
  }
  return ids;
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
  if (entry.worker.state() != v1::WORKER_STATE_LOST) entry.worker.set_state(free_state(entry));
  entry.worker.clear_task();
  entry.slot.stop_deadline_ms = 0;
}

v1::WorkerState WorkerRegistry::free_state(const WorkerEntry& entry) {
  return entry.heartbeat_seen && entry.stream_opened ? v1::WORKER_STATE_IDLE
                                                     : v1::WORKER_STATE_JOINING;
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
