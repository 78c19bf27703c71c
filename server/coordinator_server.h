// Why: `mixtrain-coordinator` and the tests start the same server: the job
// store, the scheduler, both gRPC services, health checking, reflection,
// TLS, message size limits, keepalive and the HTTP endpoints (/metrics,
// /sd/workers) are put together here once.
#pragma once

#include <absl/status/statusor.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "net/http_server.h"
#include "server/coordinator_metrics.h"
#include "server/history_retention.h"
#include "server/job_database.h"
#include "server/job_service.h"
#include "server/job_watchers.h"
#include "server/rendezvous_store.h"
#include "server/scheduler.h"
#include "server/task_outbox.h"
#include "server/worker_service.h"

namespace mixtrain::server {

struct CoordinatorOptions {
  std::string listen = "0.0.0.0:50051";      // gRPC HOST:PORT; port 0 picks a free one
  std::string http_listen = "0.0.0.0:9400";  // /metrics and /sd/workers; port 0 picks one
  std::string db_path;                       // SQLite file, created if missing
  std::string auth_token;                    // JobService bearer token; empty: none asked
  std::string join_token;                    // WorkerService token; empty: none asked
  std::string tls_cert_pem;                  // with tls_key_pem: serve TLS, else plaintext
  std::string tls_key_pem;
  std::string data_root;  // spec paths resolve here; empty: the working directory
  std::string checkpoint_root = "checkpoints";       // jobs checkpoint in <root>/<job id>
  std::chrono::milliseconds worker_timeout{10'000};  // a silent worker is LOST after this
  // A running attempt whose rank 0 reports no new step for this long, and
  // for 20 times its recent step time, fails with "no progress".
  std::chrono::milliseconds stall_timeout{120'000};
  // How long a preempted job's ranks have to checkpoint and stop.
  std::chrono::milliseconds preempt_grace{120'000};
  // An attempt whose rank 0 reports no step this long after it started
  // fails with "no progress".
  std::chrono::milliseconds first_step_timeout{1'800'000};
  // How long a LOST worker stays listed before it is forgotten.
  std::chrono::milliseconds lost_worker_retention{300'000};
  // Which finished jobs (with their logs) are kept.
  RetentionOptions retention;
};

// Largest message accepted from a client or worker, and sent back.
inline constexpr int kMaxReceiveMessageBytes = 4 * 1024 * 1024;
inline constexpr int kMaxSendMessageBytes = 16 * 1024 * 1024;

class CoordinatorServer {
 public:
  // Opens the store, takes over its running jobs and starts serving;
  // INVALID_ARGUMENT for unusable options (equal tokens, a missing data
  // root, half a TLS pair), UNAVAILABLE when an address cannot be bound,
  // the store's error when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> start(
      const CoordinatorOptions& options);
  ~CoordinatorServer() { shutdown(); }

  int port() const { return port_; }               // the gRPC port actually bound
  int http_port() const { return http_->port(); }  // the HTTP port actually bound
  JobDatabase& database() { return *database_; }

  // Blocks until shutdown() (from another thread).
  void wait() { server_->Wait(); }
  // Ends every stream and waiting call, stops accepting calls and stops
  // scheduling. Idempotent.
  void shutdown();

 private:
  CoordinatorServer(std::unique_ptr<JobDatabase> database, std::unique_ptr<WorkerSecrets> secrets,
                    const CoordinatorOptions& options, const std::filesystem::path& data_root,
                    const std::filesystem::path& checkpoint_root);
  net::HttpResponse metrics_page();
  net::HttpResponse workers_page();

  std::unique_ptr<JobDatabase> database_;
  std::unique_ptr<WorkerSecrets> secrets_;  // in the database's file
  CoordinatorMetrics metrics_;
  RendezvousStore rendezvous_;
  TaskOutbox outbox_;
  JobWatchers watchers_;
  Scheduler scheduler_;
  JobServiceImpl job_service_;
  WorkerServiceImpl worker_service_;
  HistoryRetention retention_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<net::HttpServer> http_;
  int port_ = 0;
  std::once_flag shut_down_;
};

}  // namespace mixtrain::server
