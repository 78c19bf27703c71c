// Why: an attempt's lifecycle was flags (recover_until_ms, a non-zero
// preempt deadline read as "stopping", an optional ending, a "placing"
// bool) that six functions read and set (issue 32). Here it is one state
// machine: every legal move is a row of one table, with the actions the
// scheduler takes on it, so each decision is a pure function of (state,
// event), tested over the whole table without gRPC or SQLite.
//
//   placing --start committed--> running --preempt decided--> preempting
//   placing --start refused / cancelled--> ended
//   recovering (taken over after a coordinator restart) --ranks returned--> running
//   running | recovering | preempting --succeeded / failed--> ending
//   preempting --ranks stopped / grace expired--> ending
//   preempting --preempt refused (the store kept it RUNNING)--> running
//   ending --committed--> ended;  ending --commit failed--> ending (retried)
//   any but ended --cancelled--> ended
//
// A decided ending is final: later failures and successes change nothing
// (the first cause counts), and a start or preemption whose store write
// was queued before it settles without acting.
#pragma once

#include <optional>
#include <vector>

namespace mixtrain::server {

enum class AttemptState { kPlacing, kRunning, kRecovering, kPreempting, kEnding, kEnded };

enum class AttemptEvent {
  kStartCommitted,    // the job's move to RUNNING committed
  kStartRefused,      // ... did not (cancelled meanwhile, or the store failed)
  kRanksReturned,     // every rank is back after a coordinator restart
  kPreemptDecided,    // a waiting job of a higher priority needs its workers
  kPreemptCommitted,  // the job's move to PREEMPTED committed
  kPreemptRefused,    // ... did not: it still runs
  kSucceeded,         // every rank succeeded
  kFailed,            // a rank failed, was lost, stalled or did not come back
  kRanksStopped,      // preempted: every rank checkpointed and stopped
  kGraceExpired,      // preempted: the ranks did not stop in time
  kCancelled,         // a client cancelled the job (committed)
  kEndingCommitted,   // the job's state change for the ending committed
  kEndingFailed,      // ... did not: tried again by the next tick
};

// What the scheduler does on a move, in this order.
enum class AttemptAction {
  kSendStarts,      // open the rendezvous scope, send each rank its task
  kReleaseWorkers,  // free the workers held for ranks that never started
  kQueuePreempt,    // queue the job's move to PREEMPTED
  kSendPreempts,    // ask each rank to checkpoint and stop
  kCancelPreempt,   // forget the preemption's deadline: the attempt runs on
  kStopRanks,       // cancel the ranks still running; their workers drain
  kFreeRanks,       // cancel what still runs and free the workers at once
  kQueueEnding,     // queue the job's state change for the ending
  kForget,          // drop the attempt
};

struct AttemptMove {
  AttemptState to;
  std::vector<AttemptAction> actions;
};

// The move `event` makes from `state`; nullopt when it cannot happen there.
std::optional<AttemptMove> next_attempt_move(AttemptState state, AttemptEvent event);

const char* attempt_state_name(AttemptState state);
const char* attempt_event_name(AttemptEvent event);

}  // namespace mixtrain::server
