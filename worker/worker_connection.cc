// Why: see worker_connection.h.
#include "worker_connection.h"

namespace mixtrain::worker {

absl::StatusOr<std::unique_ptr<WorkerConnection>> WorkerConnection::open(
    const ConnectionOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      cli::make_coordinator_channel(options.address, options.channel);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<WorkerConnection>(
      new WorkerConnection(v1::WorkerService::NewStub(*channel), options.join_token));
}

}  // namespace mixtrain::worker
