// Why: see rank_state.h.
#include "server/rank_state.h"

namespace mixtrain::server {

std::optional<RankState> next_rank_state(RankState state, RankEvent event) {
  if (state != RankState::kAway && state != RankState::kRunning) return std::nullopt;
  switch (event) {
    case RankEvent::kReturned:
      return RankState::kRunning;
    case RankEvent::kSucceeded:
      return RankState::kSucceeded;
    case RankEvent::kFailed:
      return RankState::kFailed;
    case RankEvent::kCancelled:
      return RankState::kCancelled;
    case RankEvent::kPreempted:
      return RankState::kPreempted;
  }
  return std::nullopt;
}

const char* rank_state_name(RankState state) {
  switch (state) {
    case RankState::kAway:
      return "away";
    case RankState::kRunning:
      return "running";
    case RankState::kSucceeded:
      return "succeeded";
    case RankState::kFailed:
      return "failed";
    case RankState::kCancelled:
      return "cancelled";
    case RankState::kPreempted:
      return "preempted";
  }
  return "?";
}

const char* rank_event_name(RankEvent event) {
  switch (event) {
    case RankEvent::kReturned:
      return "returned";
    case RankEvent::kSucceeded:
      return "succeeded";
    case RankEvent::kFailed:
      return "failed";
    case RankEvent::kCancelled:
      return "cancelled";
    case RankEvent::kPreempted:
      return "preempted";
  }
  return "?";
}

}  // namespace mixtrain::server
