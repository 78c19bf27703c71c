// Why: see grpc_channel.h.
#include "net/grpc_channel.h"

#include <fstream>
#include <sstream>

#include "net/service_timing.h"

namespace mixtrain::net {

absl::StatusOr<std::shared_ptr<grpc::Channel>> make_coordinator_channel(
    const std::string& address, const ChannelOptions& options) {
  grpc::ChannelArguments arguments;
  // Matches the coordinator's keepalive policy (coordinator_server.cc): a
  // ping every 10 s keeps a long idle stream (the worker's task stream,
  // `logs -f`) alive through NATs and notices a dead coordinator.
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(kClientKeepalive.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  arguments.SetMaxSendMessageSize(4 * 1024 * 1024);
  // Reconnect quickly after a coordinator restart (default backoff grows to 120 s).
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(kReconnectCap.count()));
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca_file.empty()) {
    std::ifstream file(options.tls_ca_file);
    std::stringstream pem;
    pem << file.rdbuf();
    if (!file || pem.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError("--tls-ca " + options.tls_ca_file +
                                        ": no PEM certificate in it");
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      arguments.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

void prepare_call(grpc::ClientContext& context, const std::string& token,
                  std::chrono::milliseconds timeout) {
  prepare_stream_call(context, token);
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

void prepare_stream_call(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

}  // namespace mixtrain::net
