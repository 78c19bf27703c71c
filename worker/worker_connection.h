// Why: the agent and its task process both call the coordinator's
// WorkerService; both go through one channel made by grpc_channel.h (TLS
// CA, keepalive) and put the join token and a deadline on every call.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpc_channel.h"
#include "mixtrain.grpc.pb.h"

namespace mixtrain::worker {

struct ConnectionOptions {
  std::string address;  // the coordinator's HOST:PORT
  cli::ChannelOptions channel;
  std::string join_token;  // empty: no authorization header
};

class WorkerConnection {
 public:
  // A connection to options.address (connecting lazily, as gRPC does).
  // INVALID_ARGUMENT when the TLS CA file is unusable.
  static absl::StatusOr<std::unique_ptr<WorkerConnection>> open(const ConnectionOptions& options);

  // The stub; thread safe, like every gRPC stub.
  v1::WorkerService::Stub& stub() { return *stub_; }

  // Puts the join token and a deadline `timeout` from now on `context`.
  void prepare(grpc::ClientContext& context, std::chrono::milliseconds timeout) const {
    cli::prepare_call(context, join_token_, timeout);
  }

 private:
  WorkerConnection(std::unique_ptr<v1::WorkerService::Stub> stub, std::string join_token)
      : stub_(std::move(stub)), join_token_(std::move(join_token)) {}

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const std::string join_token_;
};

}  // namespace mixtrain::worker
