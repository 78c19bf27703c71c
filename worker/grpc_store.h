// Why: ranks of a job scheduled by the coordinator find each other through
// its rendezvous key-value store (WorkerService Store* calls), scoped to
// one attempt. This adapts it to the engine's Store so make_communicator
// works unchanged. An unreachable coordinator (a restart, a short
// partition) is retried with backoff for as long as the caller's timeout
// allows; a scope the coordinator no longer serves fails at once.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "engine/comm/store.h"
#include "worker/worker_connection.h"

namespace mixtrain::worker {

class GrpcStore final : public Store {
 public:
  // Keys live under `scope` (Task.rendezvous_scope). `connection` must
  // outlive the store. set and add, which take no timeout, retry an
  // unreachable coordinator for up to `retry_window`.
  GrpcStore(WorkerConnection& connection, std::string scope,
            std::chrono::milliseconds retry_window = std::chrono::seconds(300))
      : connection_(connection),
        worker_id_(connection.worker_id()),
        scope_(std::move(scope)),
        retry_window_(retry_window) {}

  // Throws EngineError(kUnavailable) when the coordinator stayed
  // unreachable for retry_window, kInternal for any other refusal.
  void set(const std::string& key, std::string_view value) override;
  // Throws EngineError(kUnavailable) naming the key when it was not set
  // within `timeout` or the coordinator stayed unreachable that long.
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  // Throws EngineError(kUnavailable) naming the first missing key when
  // `timeout` passes first (or the coordinator stayed unreachable).
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  // Throws EngineError(kInvalidArgument) when the key holds a
  // non-integer, kUnavailable as set does. Adds once however often a lost
  // answer makes it retry (each add carries a request id).
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  WorkerConnection& connection_;
  const std::string worker_id_;  // the calls are this worker's (its rank's scope)
  const std::string scope_;
  const std::chrono::milliseconds retry_window_;
  std::atomic<uint64_t> next_add_{0};
};

}  // namespace mixtrain::worker
