// Why: the ranks of one attempt find each other (Gloo addresses, the NCCL
// unique id) through a key-value store on the coordinator, one namespace per
// attempt. Gets and waits may block for long while other ranks set keys, so
// a waiting call holds no thread: it is a callback run when its keys are
// all set, when its timeout passes (one timer thread serves every deadline),
// or when its scope or the store closes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace mixtrain::server {

class RendezvousStore {
 public:
  // Called once, never under the store's lock: the value of the first key
  // (empty for a wait), or DEADLINE_EXCEEDED naming the first missing key,
  // ABORTED when the scope was dropped, UNAVAILABLE when the store closed.
  using Done = std::function<void(absl::StatusOr<std::string>)>;

  // Starts the timer thread.
  RendezvousStore();
  // close(), then joins the timer thread.
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  // Sets `key` in `scope` and completes the waiters this satisfies.
  void set(const std::string& scope, const std::string& key, std::string value);

  // Calls `done` with the value of `key` once it is set in `scope`, at most
  // `timeout` from now (a timeout of zero or less only looks once).
  void get(const std::string& scope, const std::string& key, std::chrono::milliseconds timeout,
           Done done);
  // Calls `done` once every key of `keys` is set in `scope`, as get().
  void wait(const std::string& scope, std::vector<std::string> keys,
            std::chrono::milliseconds timeout, Done done);

  // Adds `delta` to the integer in `key` (0 when unset) and returns the
  // sum; INVALID_ARGUMENT when the key holds something else.
  absl::StatusOr<int64_t> add(const std::string& scope, const std::string& key, int64_t delta);

  // Forgets every key of `scope` (its attempt ended); its waiters get ABORTED.
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

  absl::Mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> scopes_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar timer_wakeup_;
  std::thread timer_;
};

}  // namespace mixtrain::server
