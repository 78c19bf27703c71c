// Why: a worker holds at most one rank, and the scheduler's fault handling
// (lost workers, healed partitions, cancels that take a while, reports
// racing heartbeats) depends on which stage that rank is in. The stages
// were a flag and a sentinel time on the worker; this names them, and one
// transition function, unit-tested like the job states, says which moves
// exist.
//
//   kFree --assign--> kSent --acknowledge--> kRunning
//   kSent --stop--> kStoppingSent --acknowledge--> kStoppingRunning
//   kRunning --stop--> kStoppingRunning;  any --release--> kFree
//
// A task is acknowledged once the worker listed it in a heartbeat,
// registration or report: from then on, a worker that no longer lists it
// lost it. A stopping task (cancelled, or a stale one being drained) frees
// the worker at its deadline even if no report comes.
#pragma once

#include <cstdint>
#include <optional>

namespace mixtrain::server {

enum class SlotState { kFree, kSent, kRunning, kStoppingSent, kStoppingRunning };
enum class SlotEvent { kAssign, kAcknowledge, kStop, kRelease };

// The state `event` leads to from `state`; nullopt when it cannot happen
// there (assigning a busy slot, acknowledging or stopping a free one).
std::optional<SlotState> next_slot_state(SlotState state, SlotEvent event);

const char* slot_state_name(SlotState state);
const char* slot_event_name(SlotEvent event);

struct TaskSlot {
  SlotState state = SlotState::kFree;
  int64_t stop_deadline_ms = 0;  // while stopping: free by then without a report

  bool acknowledged() const {
    return state == SlotState::kRunning || state == SlotState::kStoppingRunning;
  }
  bool stopping() const {
    return state == SlotState::kStoppingSent || state == SlotState::kStoppingRunning;
  }
};

}  // namespace mixtrain::server
