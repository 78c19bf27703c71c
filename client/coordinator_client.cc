// Why: see coordinator_client.h.
#include "client/coordinator_client.h"

#include "net/grpc_channel.h"

namespace mixtrain::cli {

absl::StatusOr<CoordinatorClient> CoordinatorClient::connect(const ServiceOptions& options) {
  net::ChannelOptions channel_options;
  channel_options.tls_ca_file = options.tls_ca;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      net::make_coordinator_channel(options.coordinator, channel_options);
  if (!channel.ok()) return channel.status();
  return CoordinatorClient(options.coordinator, options.token, v1::JobService::NewStub(*channel));
}

void CoordinatorClient::prepare_unary(grpc::ClientContext& context) const {
  net::prepare_call(context, token_, kUnaryTimeout);
}

grpc::Status CoordinatorClient::get_job(const std::string& id, v1::Job& job) {
  v1::GetJobRequest request;
  request.set_id(id);
  return call(&v1::JobService::Stub::GetJob, request, job);
}

void CoordinatorClient::prepare_stream(grpc::ClientContext& context) const {
  net::prepare_stream_call(context, token_);
}

int CoordinatorClient::report(const grpc::Status& status, std::string_view job_id,
                              std::ostream& err) const {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      err << "mixtrain: cannot reach the coordinator at " << address_ << ": "
          << status.error_message() << "\n";
      return kExitUnreachable;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      err << "mixtrain: not authorized (check --token / MIXTRAIN_TOKEN): " << status.error_message()
          << " (coordinator " << address_ << ")\n";
      return kExitUnreachable;
    case grpc::StatusCode::NOT_FOUND:
      if (job_id.empty()) {
        err << "mixtrain: " << status.error_message() << "\n";
      } else {
        err << "mixtrain: no job " << job_id << "\n";
      }
      return kExitUsage;
    case grpc::StatusCode::INVALID_ARGUMENT:
      err << status.error_message() << "\n";
      return kExitUsage;
    case grpc::StatusCode::FAILED_PRECONDITION:
      err << "mixtrain: " << status.error_message() << "\n";
      return kExitUsage;
    case grpc::StatusCode::UNIMPLEMENTED:
      err << "mixtrain: the coordinator at " << address_
          << " does not serve this call (UNIMPLEMENTED; is it older than this CLI?)\n";
      return kExitJobFailed;
    default:
      err << "mixtrain: the coordinator at " << address_
          << " failed the call: " << status.error_message() << " (gRPC code "
          << static_cast<int>(status.error_code()) << ")\n";
      return kExitJobFailed;
  }
}

bool is_transient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::ABORTED;
}

net::Backoff reconnect_backoff(std::chrono::seconds give_up_after) {
  return net::Backoff(std::chrono::milliseconds(500), std::chrono::seconds(5), give_up_after);
}

}  // namespace mixtrain::cli
