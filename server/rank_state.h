// Why: each rank of a running attempt is in one of a few stages that the
// scheduler's decisions turn on (is every rank back after a coordinator
// restart? did every rank succeed?). They were a flag and the last
// reported outcome; this names them, with one transition function
// unit-tested like the job states.
//
//   kAway --returned--> kRunning      (restored after a coordinator restart)
//   kAway | kRunning --succeeded/failed/cancelled/preempted-->
//       kSucceeded/kFailed/kCancelled/kPreempted
//
// A new attempt's ranks start kRunning; the ones of an attempt restored
// from the database start kAway until their worker registers again (or the
// rank reports the end it reached meanwhile). The four ends are final.
#pragma once

#include <optional>

namespace mixtrain::server {

enum class RankState { kAway, kRunning, kSucceeded, kFailed, kCancelled, kPreempted };
enum class RankEvent { kReturned, kSucceeded, kFailed, kCancelled, kPreempted };

// The state `event` leads to from `state`; nullopt when it cannot happen
// there (anything after an end).
std::optional<RankState> next_rank_state(RankState state, RankEvent event);

const char* rank_state_name(RankState state);
const char* rank_event_name(RankEvent event);

}  // namespace mixtrain::server
