// Why: the agent and its task process both call the coordinator's
// WorkerService; both go through one channel made by grpc_channel.h (TLS
// CA, keepalive) and put the join token, the worker's secret (once it
// registered: it proves the calls are this worker's) and a deadline on
// every call.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include "net/grpc_channel.h"
#include "proto/mixtrain.grpc.pb.h"

namespace mixtrain::worker {

struct ConnectionOptions {
  std::string address;  // the coordinator's HOST:PORT
  net::ChannelOptions channel;
  std::string join_token;  // empty: no authorization header
  // Who calls, once registered (RegisterResponse): the id calls name and
  // the secret that proves it; empty before.
  std::string worker_id;
  std::string worker_secret;
};


class WorkerConnection {
 public:
  // A connection to options.address (connecting lazily, as gRPC does).
  // INVALID_ARGUMENT when the TLS CA file is unusable.
  static absl::StatusOr<std::unique_ptr<WorkerConnection>> open(const ConnectionOptions& options);

  // The stub; thread safe, like every gRPC stub.
  v1::WorkerService::Stub& stub() { return *stub_; }

  // Puts the join token, the worker secret (when known) and a deadline
  // `timeout` from now on `context`.
  void prepare(grpc::ClientContext& context, std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The identity later calls carry (after each registration).
  void set_identity(const std::string& worker_id, const std::string& worker_secret)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string worker_id() ABSL_LOCKS_EXCLUDED(mu_);
  // The options this connection was opened with, with its current identity.
  ConnectionOptions options() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  WorkerConnection(std::unique_ptr<v1::WorkerService::Stub> stub, ConnectionOptions options)
      : stub_(std::move(stub)), options_(std::move(options)) {}

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  absl::Mutex mu_;
  ConnectionOptions options_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixtrain::worker
