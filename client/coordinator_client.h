// Why: every service command (submit, jobs, status, logs, cancel, workers,
// local) talks to the coordinator the same way: the global options pick
// the address, token and TLS CA; each unary call gets a deadline, each
// stream the channel's keepalive; and a failed call becomes one message
// and the exit code of DESIGN.md §3 in one place, so that "unreachable"
// and "not authorized" read the same from every command.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>
#include "proto/mixtrain.grpc.pb.h"
#include "client/output_format.h"
#include "net/backoff.h"

namespace mixtrain::cli {

// The global options of the service commands.
struct ServiceOptions {
  std::string coordinator = "127.0.0.1:50051";  // --coordinator / MIXTRAIN_COORDINATOR
  std::string token;                            // --token / MIXTRAIN_TOKEN
  std::string tls_ca;                           // --tls-ca / MIXTRAIN_TLS_CA
  OutputFormat format = OutputFormat::kTable;   // -o
};

// Exit codes of DESIGN.md §3.
inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

// How long a unary call may take.
inline constexpr std::chrono::seconds kUnaryTimeout{10};

class CoordinatorClient {
 public:
  // A client of the coordinator at options.coordinator. INVALID_ARGUMENT
  // when the TLS CA file is unusable.
  static absl::StatusOr<CoordinatorClient> connect(const ServiceOptions& options);

  // The JobService stub, for streaming calls (prepare_stream first).
  v1::JobService::Stub& jobs() { return *stub_; }
  // The coordinator's HOST:PORT as given.
  const std::string& address() const { return address_; }

  // Calls the unary JobService `method` with the token and a
  // kUnaryTimeout deadline, e.g. call(&v1::JobService::Stub::GetJob, ...).
  template <typename Request, typename Response>
  grpc::Status call(grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*,
                                                                 const Request&, Response*),
                    const Request& request, Response& response) {
    grpc::ClientContext context;
    prepare_unary(context);
    return ((*stub_).*method)(&context, request, &response);
  }

  // GetJob for `id`.
  grpc::Status get_job(const std::string& id, v1::Job& job);

  // Readies `context` for a stream: the token, no deadline.
  void prepare_stream(grpc::ClientContext& context) const;

  // Prints what the failed `status` of a call about job `job_id` (may be
  // empty) means to `err`, prefixed "mixtrain: ", and returns the exit
  // code: 3 unreachable or not authorized, 2 an invalid request (the
  // coordinator's message lines as they are), an unknown job ("no job ID")
  // or a refused move (FAILED_PRECONDITION), 1 anything else.
  int report(const grpc::Status& status, std::string_view job_id, std::ostream& err) const;

 private:
  void prepare_unary(grpc::ClientContext& context) const;

  CoordinatorClient(std::string address, std::string token,
                    std::unique_ptr<v1::JobService::Stub> stub)
      : address_(std::move(address)), token_(std::move(token)), stub_(std::move(stub)) {}

  std::string address_;
  std::string token_;
  std::shared_ptr<v1::JobService::Stub> stub_;
};

// True for the codes a broken connection shows (the coordinator is
// restarting or the network dropped): retrying may succeed.
bool is_transient(grpc::StatusCode code);

// How `submit --follow`, `local` and `logs -f` pace their reconnects to a
// lost coordinator: 0.5 s doubling to 5 s, giving up after give_up_after.
net::Backoff reconnect_backoff(std::chrono::seconds give_up_after);

}  // namespace mixtrain::cli
