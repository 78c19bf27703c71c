// Why: see coordinator_server.h.
#include "server/coordinator_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <nlohmann/json.hpp>
#include <system_error>

#include "net/service_timing.h"

namespace mixtrain::server {

CoordinatorServer::CoordinatorServer(std::unique_ptr<JobDatabase> database,
                                     std::unique_ptr<WorkerSecrets> secrets,
                                     const CoordinatorOptions& options,
                                     const std::filesystem::path& data_root,
                                     const std::filesystem::path& checkpoint_root)
    : database_(std::move(database)),
      secrets_(std::move(secrets)),
      metrics_(MIXTRAIN_VERSION),
      watchers_(database_.get(), &metrics_),
      scheduler_(database_.get(), secrets_.get(), &rendezvous_, &outbox_, &metrics_,
                 {options.worker_timeout, checkpoint_root.string(), data_root.string(),
                  options.stall_timeout, options.preempt_grace, options.first_step_timeout,
                  options.lost_worker_retention}),
      job_service_(database_.get(), &scheduler_, &watchers_, &metrics_,
                   BearerAuth(options.auth_token), data_root),
      worker_service_(&scheduler_, &outbox_, &rendezvous_, BearerAuth(options.join_token)),
      retention_(database_.get(), options.retention) {}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::start(
    const CoordinatorOptions& options) {
  if (!options.auth_token.empty() && options.auth_token == options.join_token) {
    return absl::InvalidArgumentError("the clients' token and the workers' join token must differ");
  }
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its key");
  }
  if (options.worker_timeout.count() <= 0) {
    return absl::InvalidArgumentError("the worker timeout must be positive");
  }
  if (options.lost_worker_retention.count() < 0) {
    return absl::InvalidArgumentError("the lost-worker retention must not be negative");
  }
  std::error_code error;
  const std::filesystem::path data_root = std::filesystem::canonical(
      options.data_root.empty() ? std::filesystem::current_path()
                                : std::filesystem::path(options.data_root),
      error);
  if (error || !std::filesystem::is_directory(data_root)) {
    return absl::InvalidArgumentError("data root '" + options.data_root + "' is not a directory");
  }
  const std::filesystem::path checkpoint_root =
      std::filesystem::absolute(options.checkpoint_root, error).lexically_normal();
  if (error) {
    return absl::InvalidArgumentError("checkpoint root '" + options.checkpoint_root +
                                      "': " + error.message());
  }
  absl::StatusOr<std::unique_ptr<JobDatabase>> store = JobDatabase::open(options.db_path);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<WorkerSecrets>> secrets = WorkerSecrets::open(options.db_path);
  if (!secrets.ok()) return secrets.status();
  std::unique_ptr<CoordinatorServer> coordinator(new CoordinatorServer(
      std::move(*store), std::move(*secrets), options, data_root, checkpoint_root));
  CoordinatorServer& c = *coordinator;
  c.database_->set_listener(&c.watchers_);

  absl::StatusOr<std::unique_ptr<net::HttpServer>> http = net::HttpServer::start(
      options.http_listen, {{"/metrics", [&c] { return c.metrics_page(); }},
                            {"/sd/workers", [&c] { return c.workers_page(); }}});
  if (!http.ok()) return http.status();
  c.http_ = std::move(*http);
  if (absl::Status started = c.scheduler_.start(); !started.ok()) return started;
  c.retention_.start();

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &c.port_);
  builder.RegisterService(&c.job_service_);
  builder.RegisterService(&c.worker_service_);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.SetMaxSendMessageSize(kMaxSendMessageBytes);
  // Ping idle connections every minute so dead peers are noticed; let
  // workers ping every 10 s even without calls in flight (their task stream
  // idles for long), which gRPC would otherwise answer with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(net::kServerMinPingInterval.count()));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  c.server_ = builder.BuildAndStart();
  if (c.server_ == nullptr || c.port_ == 0) {
    return absl::UnavailableError("cannot listen on " + options.listen);
  }
  // Probes and load balancers ask for a service by its full name.
  for (const char* service : {v1::JobService::service_full_name(),
                              v1::WorkerService::service_full_name()}) {
    c.server_->GetHealthCheckService()->SetServingStatus(service, true);
  }
  return coordinator;
}

void CoordinatorServer::shutdown() {
  std::call_once(shut_down_, [this] {
    // Waiting calls and streams end first: gRPC's shutdown waits for them.
    rendezvous_.close();
    watchers_.close();
    outbox_.close();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
    scheduler_.stop();
    retention_.stop();
    http_.reset();
    database_->set_listener(nullptr);
  });
}

net::HttpResponse CoordinatorServer::metrics_page() {
  std::map<v1::JobState, int64_t> jobs;
  if (absl::StatusOr<std::map<v1::JobState, int64_t>> counted = database_->count_jobs_by_state();
      counted.ok()) {
    jobs = std::move(*counted);
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8",
          metrics_.render(jobs, scheduler_.count_workers())};
}

net::HttpResponse CoordinatorServer::workers_page() {
  nlohmann::json targets = nlohmann::json::array();
  // No worker ids: Prometheus needs only where to scrape, and the ids
  // (which name a worker in WorkerService calls) are no one's business here.
  for (const auto& [address, hostname] : scheduler_.scrape_targets()) {
    targets.push_back({{"targets", {address}}, {"labels", {{"hostname", hostname}}}});
  }
  return {200, "application/json", targets.dump()};
}

}  // namespace mixtrain::server
