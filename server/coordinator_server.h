// Why: `mixtrain-coordinator` and the tests start the same server: the job
// store, the services, health checking, reflection, message size limits and
// keepalive settings are put together here once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "job_service.h"
#include "job_store.h"

namespace mixtrain::server {

struct CoordinatorOptions {
  std::string listen = "0.0.0.0:50051";  // HOST:PORT; port 0 picks a free one
  std::string db_path;                   // SQLite file, created if missing
  std::string auth_token;                // JobService bearer token; empty: none asked
};

// Largest message accepted from a client or worker, and sent back.
inline constexpr int kMaxReceiveMessageBytes = 4 * 1024 * 1024;
inline constexpr int kMaxSendMessageBytes = 16 * 1024 * 1024;

class CoordinatorServer {
 public:
  // Opens the store and starts serving; UNAVAILABLE when the address
  // cannot be bound, the store's error when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> start(
      const CoordinatorOptions& options);
  ~CoordinatorServer() { shutdown(); }

  int port() const { return port_; }  // the port actually bound
  JobStore& store() { return *store_; }

  // Blocks until shutdown() (from another thread).
  void wait() { server_->Wait(); }
  // Stops accepting calls and ends the ones in flight. Idempotent.
  void shutdown() {
    if (server_ != nullptr) server_->Shutdown();
  }

 private:
  CoordinatorServer(std::unique_ptr<JobStore> store, const std::string& auth_token)
      : store_(std::move(store)), job_service_(store_.get(), BearerAuth(auth_token)) {}

  std::unique_ptr<JobStore> store_;
  JobServiceImpl job_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace mixtrain::server
