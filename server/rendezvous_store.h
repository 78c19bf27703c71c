// Why: the ranks of one attempt find each other (Gloo addresses, the NCCL
// unique id) through a key-value store on the coordinator, one namespace per
// attempt. Gets and waits may block for long while other ranks set keys, so
// a waiting call holds no thread: it is a callback run when its keys are
// all set, when its timeout passes (one timer thread serves every deadline),
// or when its scope or the store closes. Only scopes the scheduler opened
// (running attempts) exist: a late write of a stale rank cannot re-create a
// dropped scope, and after a coordinator restart, which loses every key,
// the ranks of a restored attempt still in rendezvous fail at once
// (FAILED_PRECONDITION) instead of waiting out their timeout. A scope holds
// what a rendezvous of its world size needs and no more (scope_limits): one
// rank once set 200 keys of 1 MiB in half a second (+211 MB, issue 29).
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/key_value_table.h"

namespace mixtrain::server {

// What one scope may hold: keys plus remembered add request ids, and
// their bytes (keys, values and request ids).
struct ScopeLimits {
  size_t entries = 0;
  size_t bytes = 0;
};

// The limits of a scope of `world_size` ranks: room for every rank's keys
// and Gloo's full-mesh address table (each rank stores an address per
// peer, so it grows with the square of the world size), with a wide margin.
ScopeLimits scope_limits(int64_t world_size);

class RendezvousStore {
 public:
  // Called once, never under the store's lock: the value of the first key
  // (empty for a wait), or DEADLINE_EXCEEDED naming the first missing key,
  // ABORTED when the scope was dropped, FAILED_PRECONDITION when it is not
  // open, UNAVAILABLE when the store closed.
  using Done = std::function<void(absl::StatusOr<std::string>)>;

  // Starts the timer thread.
  RendezvousStore();
  // close(), then joins the timer thread.
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  // Opens `scope`, empty, for the attempt of `world_size` ranks that starts
  // now; it holds at most scope_limits(world_size).
  void open_scope(const std::string& scope, int64_t world_size);

  // Sets `key` in `scope` and completes the waiters this satisfies;
  // FAILED_PRECONDITION when the scope is not open, RESOURCE_EXHAUSTED
  // (naming the scope and the limit) when the scope would outgrow its
  // limits; nothing changes then.
  absl::Status set(const std::string& scope, const std::string& key, std::string value);

  // Calls `done` with the value of `key` once it is set in `scope`, at most
  // `timeout` from now (a timeout of zero or less only looks once).
  void get(const std::string& scope, const std::string& key, std::chrono::milliseconds timeout,
           Done done);
  // Calls `done` once every key of `keys` is set in `scope`, as get().
  void wait(const std::string& scope, std::vector<std::string> keys,
            std::chrono::milliseconds timeout, Done done);

  // Adds `delta` to the integer in `key` (0 when unset) and returns the
  // sum; INVALID_ARGUMENT when the key holds something else,
  // FAILED_PRECONDITION when the scope is not open, RESOURCE_EXHAUSTED as
  // set(). A `request_id` seen
  // before in the scope returns that add's sum again without adding.
  absl::StatusOr<int64_t> add(const std::string& scope, const std::string& key, int64_t delta,
                              const std::string& request_id);

  // Closes `scope` and forgets its keys (its attempt ended); its waiters
  // get ABORTED.
  void drop_scope(const std::string& scope);

  // Fails every waiter with UNAVAILABLE and refuses new ones. Idempotent.
  void close();

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiter {
    std::string scope;
    std::vector<std::string> keys;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
    Done done;
  };
  using Completion = std::pair<Done, absl::StatusOr<std::string>>;

  // The first key of `waiter` not set yet, or nullptr when all are.
  const std::string* first_missing(const Waiter& waiter) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves every satisfied waiter of `scope` into `completions`.
  void collect_satisfied(const std::string& scope, std::vector<Completion>& completions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void run_timer();

  struct Scope {
    KeyValueTable keys;
    std::map<std::string, int64_t> adds;  // request id -> the sum it returned
    ScopeLimits limits;
    ScopeLimits used;  // entries and bytes of `keys` and `adds` (a sum counts as 20 bytes)
  };

  // OK when `scope` (named `name`) has room for `entries` more entries
  // and `bytes` more bytes, else RESOURCE_EXHAUSTED.
  static absl::Status check_room(const std::string& name, const Scope& scope, size_t entries,
                                 size_t bytes);

  absl::Mutex mu_;
  std::map<std::string, Scope> scopes_ ABSL_GUARDED_BY(mu_);  // the open ones
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar timer_wakeup_;
  std::thread timer_;
};

}  // namespace mixtrain::server
