// Why: see worker_connection.h.
#include "worker/worker_connection.h"

#include "proto/worker_secret.h"

namespace mixtrain::worker {

absl::StatusOr<std::unique_ptr<WorkerConnection>> WorkerConnection::open(
    const ConnectionOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      net::make_coordinator_channel(options.address, options.channel);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<WorkerConnection>(
      new WorkerConnection(v1::WorkerService::NewStub(*channel), options));
}

void WorkerConnection::prepare(grpc::ClientContext& context, std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  net::prepare_call(context, options_.join_token, timeout);
  if (!options_.worker_secret.empty()) {
    context.AddMetadata(v1::kWorkerSecretHeader, options_.worker_secret);
  }
}

void WorkerConnection::set_identity(const std::string& worker_id,
                                    const std::string& worker_secret) {
  absl::MutexLock lock(&mu_);
  options_.worker_id = worker_id;
  options_.worker_secret = worker_secret;
}

std::string WorkerConnection::worker_id() {
  absl::MutexLock lock(&mu_);
  return options_.worker_id;
}

ConnectionOptions WorkerConnection::options() {
  absl::MutexLock lock(&mu_);
  return options_;
}

}  // namespace mixtrain::worker
