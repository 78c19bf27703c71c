// Why: see rendezvous_store.h.
#include "server/rendezvous_store.h"

#include <absl/time/time.h>

#include <algorithm>
#include <utility>

namespace mixtrain::server {
namespace {

absl::Status not_open(const std::string& scope) {
  return absl::FailedPreconditionError(
      "scope '" + scope +
      "' is not a running attempt's: the attempt ended, or the coordinator restarted and lost "
      "its rendezvous");
}

// Gloo's address of one peer is under 200 bytes; a rank's keys are a few.
constexpr size_t kBaseEntries = 1024;
constexpr size_t kEntriesPerRank = 64;
constexpr size_t kBaseBytes = size_t{16} << 20;
constexpr size_t kBytesPerRankPair = 1024;

void run_completions(
    std::vector<std::pair<RendezvousStore::Done, absl::StatusOr<std::string>>>& completions) {
  for (auto& [done, result] : completions) done(std::move(result));
}

}  // namespace

ScopeLimits scope_limits(int64_t world_size) {
  const size_t ranks = size_t(std::max<int64_t>(world_size, 1));
  return {.entries = kBaseEntries + kEntriesPerRank * ranks,
          .bytes = kBaseBytes + kBytesPerRankPair * ranks * ranks};
}

absl::Status RendezvousStore::check_room(const std::string& name, const Scope& scope,
                                         size_t entries, size_t bytes) {
  if (scope.used.entries + entries > scope.limits.entries) {
    return absl::ResourceExhaustedError(
        "scope '" + name + "' holds " + std::to_string(scope.used.entries) +
        " keys and add ids; at most " + std::to_string(scope.limits.entries) +
        " are accepted for its world size (a rank stores far more than a rendezvous needs)");
  }
  if (scope.used.bytes + bytes > scope.limits.bytes) {
    return absl::ResourceExhaustedError(
        "scope '" + name + "' holds " + std::to_string(scope.used.bytes) + " bytes; this would add " +
        std::to_string(bytes) + " and at most " + std::to_string(scope.limits.bytes) +
        " are accepted for its world size (a rank stores far more than a rendezvous needs)");
  }
  return absl::OkStatus();
}

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

void RendezvousStore::open_scope(const std::string& scope, int64_t world_size) {
  absl::MutexLock lock(&mu_);
  scopes_[scope] = Scope{.limits = scope_limits(world_size)};
}

absl::Status RendezvousStore::set(const std::string& scope, const std::string& key,
                                  std::string value) {
  std::vector<Completion> completions;
  {
    absl::MutexLock lock(&mu_);
    const auto open = scopes_.find(scope);
    if (open == scopes_.end()) return not_open(scope);
    Scope& entry = open->second;
    const std::string* old = entry.keys.find(key);
    // A replaced value frees its bytes; room is checked for the growth only.
    const size_t old_bytes = old == nullptr ? 0 : key.size() + old->size();
    const size_t new_bytes = key.size() + value.size();
    const size_t added_entries = old == nullptr ? 1 : 0;
    if (absl::Status room = check_room(scope, entry, added_entries,
                                       new_bytes > old_bytes ? new_bytes - old_bytes : 0);
        !room.ok()) {
      return room;
    }
    entry.used.entries += added_entries;
    entry.used.bytes = entry.used.bytes + new_bytes - old_bytes;
    entry.keys.set(key, value);
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
    Scope& entry = open->second;
    if (const auto seen = entry.adds.find(request_id);
        !request_id.empty() && seen != entry.adds.end()) {
      return seen->second;
    }
    // The sum's decimal text is at most 20 bytes.
    constexpr size_t kSumBytes = 20;
    const std::string* old = entry.keys.find(key);
    const size_t added_entries = (old == nullptr ? 1 : 0) + (request_id.empty() ? 0 : 1);
    const size_t added_bytes = (old == nullptr ? key.size() + kSumBytes : 0) + request_id.size();
    if (absl::Status room = check_room(scope, entry, added_entries, added_bytes); !room.ok()) {
      return room;
    }
    const std::optional<int64_t> added = entry.keys.add(key, delta);
    if (!added) {
      return absl::InvalidArgumentError("key '" + key + "' in scope '" + scope +
                                        "' holds a non-integer value");
    }
    sum = *added;
    entry.used.entries += added_entries;
    entry.used.bytes += added_bytes;
    if (!request_id.empty()) entry.adds[request_id] = sum;
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
