// Why: see task_slot.h.
#include "server/task_slot.h"

namespace mixtrain::server {

std::optional<SlotState> next_slot_state(SlotState state, SlotEvent event) {
  using S = SlotState;
  switch (event) {
    case SlotEvent::kAssign:
      if (state == S::kFree) return S::kSent;
      return std::nullopt;
    case SlotEvent::kAcknowledge:
      switch (state) {
        case S::kFree: return std::nullopt;
        case S::kSent:
        case S::kRunning: return S::kRunning;
        case S::kStoppingSent:
        case S::kStoppingRunning: return S::kStoppingRunning;
      }
      return std::nullopt;
    case SlotEvent::kStop:
      switch (state) {
        case S::kFree: return std::nullopt;
        case S::kSent:
        case S::kStoppingSent: return S::kStoppingSent;
        case S::kRunning:
        case S::kStoppingRunning: return S::kStoppingRunning;
      }
      return std::nullopt;
    case SlotEvent::kRelease:
      return S::kFree;
  }
  return std::nullopt;
}

const char* slot_state_name(SlotState state) {
  switch (state) {
    case SlotState::kFree: return "free";
    case SlotState::kSent: return "sent";
    case SlotState::kRunning: return "running";
    case SlotState::kStoppingSent: return "stopping (never acknowledged)";
    case SlotState::kStoppingRunning: return "stopping";
  }
  return "?";
}

const char* slot_event_name(SlotEvent event) {
  switch (event) {
    case SlotEvent::kAssign: return "assign";
    case SlotEvent::kAcknowledge: return "acknowledge";
    case SlotEvent::kStop: return "stop";
    case SlotEvent::kRelease: return "release";
  }
  return "?";
}

}  // namespace mixtrain::server
