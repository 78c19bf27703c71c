// Why: see attempt_state.h. The table below is the whole machine.
#include "server/attempt_state.h"

namespace mixtrain::server {
namespace {

using S = AttemptState;
using E = AttemptEvent;
using A = AttemptAction;

struct Row {
  S from;
  E event;
  S to;
  std::vector<A> actions;
};

const std::vector<Row>& table() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> r = {
        {S::kPlacing, E::kStartCommitted, S::kRunning, {A::kSendStarts}},
        {S::kPlacing, E::kStartRefused, S::kEnded, {A::kReleaseWorkers, A::kForget}},
        // A worker lost before the start committed: the ending's write is
        // queued behind the start's, and settles whichever way that went.
        {S::kPlacing, E::kFailed, S::kEnding, {A::kReleaseWorkers, A::kQueueEnding}},
        {S::kPlacing, E::kCancelled, S::kEnded, {A::kReleaseWorkers, A::kForget}},
        {S::kRecovering, E::kRanksReturned, S::kRunning, {}},
        {S::kPreempting, E::kPreemptCommitted, S::kPreempting, {A::kSendPreempts}},
        {S::kPreempting, E::kPreemptRefused, S::kRunning, {A::kCancelPreempt}},
        {S::kPreempting, E::kRanksStopped, S::kEnding, {A::kFreeRanks, A::kQueueEnding}},
        {S::kPreempting, E::kGraceExpired, S::kEnding, {A::kStopRanks, A::kQueueEnding}},
        {S::kEnding, E::kEndingCommitted, S::kEnded, {A::kForget}},
        {S::kEnding, E::kEndingFailed, S::kEnding, {}},
    };
    // Running, with or without every rank (back), and while stopping.
    for (S live : {S::kRunning, S::kRecovering, S::kPreempting}) {
      if (live != S::kPreempting)
        r.push_back({live, E::kPreemptDecided, S::kPreempting, {A::kQueuePreempt}});
      r.push_back({live, E::kSucceeded, S::kEnding, {A::kFreeRanks, A::kQueueEnding}});
      r.push_back({live, E::kFailed, S::kEnding, {A::kStopRanks, A::kQueueEnding}});
      r.push_back({live, E::kCancelled, S::kEnded, {A::kStopRanks, A::kForget}});
    }
    r.push_back({S::kEnding, E::kCancelled, S::kEnded, {A::kStopRanks, A::kForget}});
    // Decided is final: another end, or a write queued before the ending,
    // changes nothing.
    for (E late :
         {E::kSucceeded, E::kFailed, E::kRanksStopped, E::kGraceExpired, E::kStartCommitted,
          E::kStartRefused, E::kPreemptCommitted, E::kPreemptRefused}) {
      r.push_back({S::kEnding, late, S::kEnding, {}});
    }
    return r;
  }();
  return rows;
}

}  // namespace

std::optional<AttemptMove> next_attempt_move(AttemptState state, AttemptEvent event) {
  for (const Row& row : table()) {
    if (row.from == state && row.event == event) return AttemptMove{row.to, row.actions};
  }
  return std::nullopt;
}

const char* attempt_state_name(AttemptState state) {
  switch (state) {
    case S::kPlacing:
      return "placing";
    case S::kRunning:
      return "running";
    case S::kRecovering:
      return "recovering";
    case S::kPreempting:
      return "preempting";
    case S::kEnding:
      return "ending";
    case S::kEnded:
      return "ended";
  }
  return "?";
}

const char* attempt_event_name(AttemptEvent event) {
  switch (event) {
    case E::kStartCommitted:
      return "start committed";
    case E::kStartRefused:
      return "start refused";
    case E::kRanksReturned:
      return "ranks returned";
    case E::kPreemptDecided:
      return "preempt decided";
    case E::kPreemptCommitted:
      return "preempt committed";
    case E::kPreemptRefused:
      return "preempt refused";
    case E::kSucceeded:
      return "succeeded";
    case E::kFailed:
      return "failed";
    case E::kRanksStopped:
      return "ranks stopped";
    case E::kGraceExpired:
      return "grace expired";
    case E::kCancelled:
      return "cancelled";
    case E::kEndingCommitted:
      return "ending committed";
    case E::kEndingFailed:
      return "ending failed";
  }
  return "?";
}

}  // namespace mixtrain::server
