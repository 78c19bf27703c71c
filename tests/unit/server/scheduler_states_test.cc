// Why: the scheduler's decisions read three small state machines: a
// worker's task slot (is its task acknowledged? is it stopping?), each
// rank of an attempt (away after a restart? ended how?) and the attempt
// itself (placing, running, preempting, ending: what each event does). Every move of
// both is pinned here, the legal ones and that every other one is
// refused, and the registry keeps the worker's state and task in step
// with its slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/attempt_state.h"
#include "server/rank_state.h"
#include "server/task_slot.h"
#include "server/worker_registry.h"

namespace mixtrain::server {
namespace {

using S = SlotState;
using E = SlotEvent;

TEST(TaskSlotStateMachine, OnlyTheDocumentedMovesExist) {
  const std::map<std::pair<S, E>, S> legal = {
      {{S::kFree, E::kAssign}, S::kSent},
      {{S::kSent, E::kAcknowledge}, S::kRunning},
      {{S::kRunning, E::kAcknowledge}, S::kRunning},
      {{S::kSent, E::kStop}, S::kStoppingSent},
      {{S::kRunning, E::kStop}, S::kStoppingRunning},
      {{S::kStoppingSent, E::kStop}, S::kStoppingSent},
      {{S::kStoppingRunning, E::kStop}, S::kStoppingRunning},
      {{S::kStoppingSent, E::kAcknowledge}, S::kStoppingRunning},
      {{S::kStoppingRunning, E::kAcknowledge}, S::kStoppingRunning},
      {{S::kFree, E::kRelease}, S::kFree},
      {{S::kSent, E::kRelease}, S::kFree},
      {{S::kRunning, E::kRelease}, S::kFree},
      {{S::kStoppingSent, E::kRelease}, S::kFree},
      {{S::kStoppingRunning, E::kRelease}, S::kFree}};
  for (S state : {S::kFree, S::kSent, S::kRunning, S::kStoppingSent, S::kStoppingRunning}) {
    for (E event : {E::kAssign, E::kAcknowledge, E::kStop, E::kRelease}) {
      const auto expected = legal.find({state, event});
      const std::optional<S> next = next_slot_state(state, event);
      if (expected == legal.end()) {
        EXPECT_FALSE(next.has_value()) << slot_state_name(state) << " + " << slot_event_name(event);
      } else {
        EXPECT_EQ(next, expected->second)
            << slot_state_name(state) << " + " << slot_event_name(event);
      }
    }
  }
}

TEST(TaskSlotStateMachine, AcknowledgedAndStoppingFollowTheState) {
  EXPECT_FALSE(TaskSlot{S::kSent}.acknowledged());
  EXPECT_TRUE(TaskSlot{S::kRunning}.acknowledged());
  EXPECT_TRUE(TaskSlot{S::kStoppingRunning}.acknowledged());
  EXPECT_FALSE(TaskSlot{S::kStoppingSent}.acknowledged());
  EXPECT_TRUE(TaskSlot{S::kStoppingSent}.stopping());
  EXPECT_FALSE(TaskSlot{S::kRunning}.stopping());
}

TEST(TaskSlotStateMachine, TheRegistryMovesTheWorkerWithItsSlot) {
  WorkerEntry entry;
  entry.worker.set_id("w");
  entry.worker.set_state(v1::WORKER_STATE_IDLE);
  entry.heartbeat_seen = entry.stream_opened = true;
  v1::RunningTask task;
  task.set_job_id("j");
  WorkerRegistry::acknowledge(entry);  // nothing to acknowledge: refused, nothing changes
  EXPECT_EQ(entry.slot.state, S::kFree);
  WorkerRegistry::assign(entry, task);
  EXPECT_EQ(entry.slot.state, S::kSent);
  EXPECT_EQ(entry.worker.state(), v1::WORKER_STATE_BUSY);
  EXPECT_EQ(entry.worker.task().job_id(), "j");
  v1::RunningTask other;
  other.set_job_id("k");
  WorkerRegistry::assign(entry, other);  // busy: refused
  EXPECT_EQ(entry.worker.task().job_id(), "j");
  WorkerRegistry::stop(entry, 1234);
  EXPECT_EQ(entry.slot.state, S::kStoppingSent);
  EXPECT_EQ(entry.slot.stop_deadline_ms, 1234);
  WorkerRegistry::acknowledge(entry);
  EXPECT_EQ(entry.slot.state, S::kStoppingRunning);
  WorkerRegistry::release(entry);
  EXPECT_EQ(entry.slot.state, S::kFree);
  EXPECT_EQ(entry.slot.stop_deadline_ms, 0);
  EXPECT_EQ(entry.worker.state(), v1::WORKER_STATE_IDLE);
  EXPECT_FALSE(entry.worker.has_task());
  // One that never opened its task stream is freed to JOINING, not IDLE.
  entry.stream_opened = false;
  WorkerRegistry::assign(entry, task);
  WorkerRegistry::release(entry);
  EXPECT_EQ(entry.worker.state(), v1::WORKER_STATE_JOINING);
}

// Registration order survives removals, pages continue where the last
// one ended, and LOST entries are found by age or by place.
TEST(WorkerRegistryOrder, PagesRemovalsAndLostEntries) {
  WorkerRegistry registry;
  v1::RegisterRequest request;
  request.set_hostname("h");
  request.set_metrics_address("10.0.0.1:9401");
  for (const char* id : {"a", "b", "c", "d"}) {
    WorkerEntry& entry = registry.upsert(id, request, 1'000);
    EXPECT_EQ(entry.worker.state(), v1::WORKER_STATE_JOINING);
  }
  registry.remove("b");
  WorkerPage first = registry.page(0, 2);
  ASSERT_EQ(first.entries.size(), 2u);
  EXPECT_EQ(first.entries[0]->worker.id(), "a");
  EXPECT_EQ(first.entries[1]->worker.id(), "c");
  const WorkerPage second = registry.page(first.next_seq, 2);
  ASSERT_EQ(second.entries.size(), 1u);
  EXPECT_EQ(second.entries[0]->worker.id(), "d");
  EXPECT_EQ(second.next_seq, 0u);
  registry.find("a")->worker.set_state(v1::WORKER_STATE_LOST);
  registry.find("c")->worker.set_state(v1::WORKER_STATE_LOST);
  registry.find("c")->worker.set_last_heartbeat_unix_ms(500);
  EXPECT_EQ(registry.lost_ids(900), std::vector<std::string>{"c"});
  EXPECT_EQ(registry.lost_ids(0, "h", "10.0.0.1:9401"), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(registry.lost_ids(0, "h", "10.0.0.2:9401").empty());
}

// Liveness is the registry's own: silent workers become LOST (their task
// left for the scheduler to account for) and stopping tasks past their
// deadline free their worker.
TEST(WorkerLiveness, SilentWorkersAreLostAndOverdueStopsFreeTheirWorker) {
  WorkerRegistry registry;
  v1::RegisterRequest request;
  WorkerEntry& silent = registry.upsert("silent", request, 1'000);
  WorkerEntry& stopping = registry.upsert("stopping", request, 1'000);
  WorkerEntry& fine = registry.upsert("fine", request, 1'000);
  for (WorkerEntry* entry : {&silent, &stopping, &fine}) {
    entry->worker.set_state(v1::WORKER_STATE_IDLE);
    entry->heartbeat_seen = entry->stream_opened = true;
  }
  v1::RunningTask task;
  task.set_job_id("j");
  WorkerRegistry::assign(silent, task);
  WorkerRegistry::assign(stopping, task);
  WorkerRegistry::stop(stopping, 4'000);
  silent.worker.set_last_heartbeat_unix_ms(1'000);
  stopping.worker.set_last_heartbeat_unix_ms(4'500);
  fine.worker.set_last_heartbeat_unix_ms(4'500);

  bool changed = false;
  EXPECT_TRUE(registry.expire(3'000, 5'000, changed).empty());  // nobody silent, no deadline yet
  EXPECT_FALSE(changed);
  const std::vector<WorkerEntry*> lost = registry.expire(6'500, 5'000, changed);
  EXPECT_TRUE(changed);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], &silent);
  EXPECT_EQ(silent.worker.state(), v1::WORKER_STATE_LOST);
  EXPECT_TRUE(silent.worker.has_task());  // the scheduler accounts for it
  EXPECT_EQ(stopping.worker.state(), v1::WORKER_STATE_IDLE);
  EXPECT_EQ(stopping.slot.state, S::kFree);
  EXPECT_EQ(fine.worker.state(), v1::WORKER_STATE_IDLE);
  changed = false;
  EXPECT_TRUE(registry.expire(6'600, 5'000, changed).empty());  // LOST is not lost again
}

TEST(RankStateMachine, OnlyTheDocumentedMovesExist) {
  using R = RankState;
  using V = RankEvent;
  const std::map<std::pair<R, V>, R> legal = {
      {{R::kAway, V::kReturned}, R::kRunning},    {{R::kRunning, V::kReturned}, R::kRunning},
      {{R::kAway, V::kSucceeded}, R::kSucceeded}, {{R::kRunning, V::kSucceeded}, R::kSucceeded},
      {{R::kAway, V::kFailed}, R::kFailed},       {{R::kRunning, V::kFailed}, R::kFailed},
      {{R::kAway, V::kCancelled}, R::kCancelled}, {{R::kRunning, V::kCancelled}, R::kCancelled}};
  for (R state : {R::kAway, R::kRunning, R::kSucceeded, R::kFailed, R::kCancelled}) {
    for (V event : {V::kReturned, V::kSucceeded, V::kFailed, V::kCancelled}) {
      const auto expected = legal.find({state, event});
      const std::optional<R> next = next_rank_state(state, event);
      if (expected == legal.end()) {
        EXPECT_FALSE(next.has_value()) << rank_state_name(state) << " + " << rank_event_name(event);
      } else {
        EXPECT_EQ(next, expected->second)
            << rank_state_name(state) << " + " << rank_event_name(event);
      }
    }
  }
}

// Every (state, event) pair of the attempt: the documented moves with
// their actions in order, and every other pair refused. The scheduler
// takes a move's actions and nothing else, so this pins its decisions.
TEST(AttemptStateMachine, OnlyTheDocumentedMovesExistWithTheirActions) {
  using S = AttemptState;
  using E = AttemptEvent;
  using A = AttemptAction;
  std::map<std::pair<S, E>, AttemptMove> legal = {
      {{S::kPlacing, E::kStartCommitted}, {S::kRunning, {A::kSendStarts}}},
      {{S::kPlacing, E::kStartRefused}, {S::kEnded, {A::kReleaseWorkers, A::kForget}}},
      {{S::kPlacing, E::kFailed}, {S::kEnding, {A::kReleaseWorkers, A::kQueueEnding}}},
      {{S::kPlacing, E::kCancelled}, {S::kEnded, {A::kReleaseWorkers, A::kForget}}},
      {{S::kRecovering, E::kRanksReturned}, {S::kRunning, {}}},
      {{S::kPreempting, E::kPreemptCommitted}, {S::kPreempting, {A::kSendPreempts}}},
      {{S::kPreempting, E::kPreemptRefused}, {S::kRunning, {A::kCancelPreempt}}},
      {{S::kPreempting, E::kRanksStopped}, {S::kEnding, {A::kFreeRanks, A::kQueueEnding}}},
      {{S::kPreempting, E::kGraceExpired}, {S::kEnding, {A::kStopRanks, A::kQueueEnding}}},
      {{S::kEnding, E::kEndingCommitted}, {S::kEnded, {A::kForget}}},
      {{S::kEnding, E::kEndingFailed}, {S::kEnding, {}}},
      {{S::kEnding, E::kCancelled}, {S::kEnded, {A::kStopRanks, A::kForget}}}};
  for (S live : {S::kRunning, S::kRecovering, S::kPreempting}) {
    if (live != S::kPreempting)
      legal[{live, E::kPreemptDecided}] = {S::kPreempting, {A::kQueuePreempt}};
    legal[{live, E::kSucceeded}] = {S::kEnding, {A::kFreeRanks, A::kQueueEnding}};
    legal[{live, E::kFailed}] = {S::kEnding, {A::kStopRanks, A::kQueueEnding}};
    legal[{live, E::kCancelled}] = {S::kEnded, {A::kStopRanks, A::kForget}};
  }
  for (E late : {E::kSucceeded, E::kFailed, E::kRanksStopped, E::kGraceExpired, E::kStartCommitted,
                 E::kStartRefused, E::kPreemptCommitted, E::kPreemptRefused}) {
    legal[{S::kEnding, late}] = {S::kEnding, {}};
  }
  const std::vector<S> states = {S::kPlacing,    S::kRunning, S::kRecovering,
                                 S::kPreempting, S::kEnding,  S::kEnded};
  const std::vector<E> events = {E::kStartCommitted, E::kStartRefused,     E::kRanksReturned,
                                 E::kPreemptDecided, E::kPreemptCommitted, E::kPreemptRefused,
                                 E::kSucceeded,      E::kFailed,           E::kRanksStopped,
                                 E::kGraceExpired,   E::kCancelled,        E::kEndingCommitted,
                                 E::kEndingFailed};
  int moves = 0;
  for (S state : states) {
    for (E event : events) {
      const std::string what =
          std::string(attempt_state_name(state)) + " + " + attempt_event_name(event);
      const std::optional<AttemptMove> move = next_attempt_move(state, event);
      const auto expected = legal.find({state, event});
      if (expected == legal.end()) {
        EXPECT_FALSE(move.has_value()) << what;
        continue;
      }
      ++moves;
      ASSERT_TRUE(move.has_value()) << what;
      EXPECT_EQ(move->to, expected->second.to) << what;
      EXPECT_EQ(move->actions, expected->second.actions) << what;
      // Forgetting the attempt is the last thing a move does, and only a
      // move to kEnded does it.
      const bool forgets = !move->actions.empty() && move->actions.back() == A::kForget;
      EXPECT_EQ(forgets, move->to == S::kEnded) << what;
      EXPECT_EQ(std::count(move->actions.begin(), move->actions.end(), A::kForget), forgets ? 1 : 0)
          << what;
    }
  }
  EXPECT_EQ(moves, int(legal.size()));
  for (S state : states) EXPECT_STRNE(attempt_state_name(state), "?");
  for (E event : events) EXPECT_STRNE(attempt_event_name(event), "?");
}

}  // namespace
}  // namespace mixtrain::server
