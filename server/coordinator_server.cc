// Why: see coordinator_server.h.
#include "coordinator_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

namespace mixtrain::server {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::start(
    const CoordinatorOptions& options) {
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::open(options.db_path);
  if (!store.ok()) return store.status();
  std::unique_ptr<CoordinatorServer> coordinator(
      new CoordinatorServer(std::move(*store), options.auth_token));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &coordinator->port_);
  builder.RegisterService(&coordinator->job_service_);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.SetMaxSendMessageSize(kMaxSendMessageBytes);
  // Ping idle connections every minute so dead peers are noticed; let
  // workers ping every 10 s even without calls in flight (their task stream
  // idles for long), which gRPC would otherwise answer with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  coordinator->server_ = builder.BuildAndStart();
  if (coordinator->server_ == nullptr || coordinator->port_ == 0) {
    return absl::UnavailableError("cannot listen on " + options.listen);
  }
  return coordinator;
}

}  // namespace mixtrain::server
