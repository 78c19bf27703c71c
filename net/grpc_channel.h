// Why: the CLI and the worker agents call the coordinator the same way: one
// channel (TLS when a CA is given, keepalive the server accepts, message
// limits) and a context per call that carries the bearer token and a
// deadline, since DESIGN.md §9 asks for a deadline on every client call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include <absl/status/statusor.h>

namespace mixtrain::net {

struct ChannelOptions {
  std::string tls_ca_file;  // PEM CA that signed the coordinator's certificate; empty: plaintext
  // Hostname the certificate must name; empty: the address's host.
  std::string tls_server_name;
};

// A channel to `address` (HOST:PORT). INVALID_ARGUMENT when the CA file
// cannot be read or holds no certificate.
absl::StatusOr<std::shared_ptr<grpc::Channel>> make_coordinator_channel(
    const std::string& address, const ChannelOptions& options = {});

// Sets "authorization: Bearer <token>" (when `token` is not empty) and a
// deadline `timeout` from now on `context`.
void prepare_call(grpc::ClientContext& context, const std::string& token,
                  std::chrono::milliseconds timeout);

// For a long-lived stream (WatchJob, `logs -f`, the worker's task stream):
// sets only the bearer token; the channel's keepalive notices a dead peer.
void prepare_stream_call(grpc::ClientContext& context, const std::string& token);

}  // namespace mixtrain::net
