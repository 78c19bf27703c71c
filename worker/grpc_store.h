// Why: ranks of a job scheduled by the coordinator find each other through
// its rendezvous key-value store (WorkerService Store* calls), scoped to
// one attempt. This adapts it to the engine's Store so make_communicator
// works unchanged. A coordinator restart during rendezvous must not fail
// the job, so unreachable-coordinator errors are retried with backoff for
// as long as the caller's timeout allows.
#pragma once

#include <chrono>
#include <string>

#include "comm/store.h"
#include "worker_connection.h"

namespace mixtrain::worker {

class GrpcStore final : public Store {
 public:
  // Keys live under `scope` (Task.rendezvous_scope). `connection` must
  // outlive the store. set and add, which take no timeout, retry an
  // unreachable coordinator for up to `retry_window`.
  GrpcStore(WorkerConnection& connection, std::string scope,
            std::chrono::milliseconds retry_window = std::chrono::seconds(300))
      : connection_(connection), scope_(std::move(scope)), retry_window_(retry_window) {}

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
  // non-integer, kUnavailable as set does. A retry after a lost answer may
  // add twice; rendezvous uses add only for counters that tolerate it.
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  WorkerConnection& connection_;
  const std::string scope_;
  const std::chrono::milliseconds retry_window_;
};

}  // namespace mixtrain::worker
