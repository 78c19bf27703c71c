// Why: see rendezvous_store.h.
#include "server/rendezvous_store.h"

#include <absl/time/time.h>

#include <utility>

namespace mixtrain::server {
namespace {

absl::Status not_open(const std::string& scope) {
  return absl::FailedPreconditionError(
      "scope '" + scope +
      "' is not a running attempt's: the attempt ended, or the coordinator restarted and lost "
      "its rendezvous");
}

void run_completions(
    std::vector<std::pair<RendezvousStore::Done, absl::StatusOr<std::string>>>& completions) {
  for (auto& [done, result] : completions) done(std::move(result));
}

}  // namespace

RendezvousStore::RendezvousStore() : timer_([this] { run_timer(); }) {}

RendezvousStore::~RendezvousStore() {
  close();
  timer_.join();
}

const std::string* RendezvousStore::first_missing(const Waiter& waiter) const {
  const auto scope = scopes_.find(waiter.scope);
  if (scope == scopes_.end()) return waiter.keys.empty() ? nullptr : &waiter.keys.front();
  return scope->second.keys.first_missing(waiter.keys);
}

void RendezvousStore::collect_satisfied(const std::string& scope,
                                        std::vector<Completion>& completions) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.scope != scope || first_missing(it->second) != nullptr) {
      ++it;
      continue;
    }
    std::string value =
        it->second.keys.empty() ? "" : *scopes_[scope].keys.find(it->second.keys.front());
    completions.emplace_back(std::move(it->second.done), std::move(value));
    it = waiters_.erase(it);
  }
}

void RendezvousStore::open_scope(const std::string& scope) {
  absl::MutexLock lock(&mu_);
  scopes_[scope] = Scope();
}

absl::Status RendezvousStore::set(const std::string& scope, const std::string& key,
                                  std::string value) {
  std::vector<Completion> completions;
  {
    absl::MutexLock lock(&mu_);
    const auto open = scopes_.find(scope);
    if (open == scopes_.end()) return not_open(scope);
    open->second.keys.set(key, value);
    collect_satisfied(scope, completions);
  }
  run_completions(completions);
  return absl::OkStatus();
}

void RendezvousStore::get(const std::string& scope, const std::string& key,
                          std::chrono::milliseconds timeout, Done done) {
  wait(scope, {key}, timeout, std::move(done));
}

void RendezvousStore::wait(const std::string& scope, std::vector<std::string> keys,
                           std::chrono::milliseconds timeout, Done done) {
  std::vector<Completion> completions;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      completions.emplace_back(std::move(done),
                               absl::UnavailableError("the coordinator is shutting down"));
    } else if (!scopes_.contains(scope)) {
      completions.emplace_back(std::move(done), not_open(scope));
    } else {
      const uint64_t id = next_waiter_++;
      waiters_[id] = {scope, std::move(keys), Clock::now() + timeout, timeout, std::move(done)};
      collect_satisfied(scope, completions);
      timer_wakeup_.Signal();
    }
  }
  run_completions(completions);
}

absl::StatusOr<int64_t> RendezvousStore::add(const std::string& scope, const std::string& key,
                                             int64_t delta, const std::string& request_id) {
  std::vector<Completion> completions;
  int64_t sum = 0;
  {
    absl::MutexLock lock(&mu_);
    const auto open = scopes_.find(scope);
    if (open == scopes_.end()) return not_open(scope);
    if (const auto seen = open->second.adds.find(request_id);
        !request_id.empty() && seen != open->second.adds.end()) {
      return seen->second;
    }
    const std::optional<int64_t> added = open->second.keys.add(key, delta);
    if (!added) {
      return absl::InvalidArgumentError("key '" + key + "' in scope '" + scope +
                                        "' holds a non-integer value");
    }
    sum = *added;
    if (!request_id.empty()) open->second.adds[request_id] = sum;
    collect_satisfied(scope, completions);
  }
  run_completions(completions);
  return sum;
}

void RendezvousStore::drop_scope(const std::string& scope) {
  std::vector<Completion> completions;
  {
    absl::MutexLock lock(&mu_);
    scopes_.erase(scope);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.scope != scope) {
        ++it;
        continue;
      }
      completions.emplace_back(std::move(it->second.done),
                               absl::AbortedError("scope '" + scope + "' ended with its attempt"));
      it = waiters_.erase(it);
    }
  }
  run_completions(completions);
}

void RendezvousStore::close() {
  std::vector<Completion> completions;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [id, waiter] : waiters_) {
      completions.emplace_back(std::move(waiter.done),
                               absl::UnavailableError("the coordinator is shutting down"));
    }
    waiters_.clear();
    timer_wakeup_.Signal();
  }
  run_completions(completions);
}

void RendezvousStore::run_timer() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = now + std::chrono::hours(1);
    std::vector<Completion> completions;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline > now) {
        next = std::min(next, it->second.deadline);
        ++it;
        continue;
      }
      completions.emplace_back(
          std::move(it->second.done),
          absl::DeadlineExceededError("key '" + *first_missing(it->second) + "' of scope '" +
                                      it->second.scope + "' was not set within " +
                                      std::to_string(it->second.timeout.count()) + " ms"));
      it = waiters_.erase(it);
    }
    if (!completions.empty()) {
      mu_.Unlock();
      run_completions(completions);
      mu_.Lock();
      continue;
    }
    timer_wakeup_.WaitWithTimeout(&mu_, absl::FromChrono(next - now));
  }
}

}  // namespace mixtrain::server
