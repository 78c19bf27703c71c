// Why: see job_service.h.
#include "job_service.h"

#include <algorithm>
#include <functional>
#include <string>

#include "job_spec_yaml.h"

namespace mixtrain::server {
namespace {

// absl and gRPC share the canonical status codes.
grpc::Status to_grpc(const absl::Status& status) {
  return {static_cast<grpc::StatusCode>(status.code()), std::string(status.message())};
}

// Finishes the call with `auth`'s verdict, or when it lets the call in,
// with what `handle` returns.
grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* context, const BearerAuth& auth,
                                 const std::function<grpc::Status()>& handle) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = auth.check(*context);
  if (status.ok()) status = handle();
  reactor->Finish(status);
  return reactor;
}

// The job as the API shows it; `with_spec` also copies the submitted YAML.
void to_proto(const JobRecord& record, bool with_spec, v1::Job& job) {
  job.set_id(record.id);
  job.set_name(record.name);
  job.set_state(record.state);
  if (with_spec) job.set_spec_yaml(record.spec_yaml);
  job.set_attempt(record.attempt);
  job.mutable_progress()->set_steps(record.steps);
  job.set_created_unix_ms(record.created_unix_ms);
  job.set_updated_unix_ms(record.updated_unix_ms);
  job.set_message(record.message);
}

// Writes the job into `response`, or returns the store's error.
grpc::Status reply_job(const absl::StatusOr<JobRecord>& record, v1::Job& response) {
  if (!record.ok()) return to_grpc(record.status());
  to_proto(*record, /*with_spec=*/true, response);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status JobServiceImpl::submit(const v1::SubmitJobRequest& request,
                                    v1::SubmitJobResponse& response) {
  if (request.spec_yaml().size() > kMaxSpecBytes) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "the job spec is " + std::to_string(request.spec_yaml().size()) + " bytes, at most " +
                std::to_string(kMaxSpecBytes) + " are accepted"};
  }
  const std::string source = request.source_name().empty() ? "job.yaml" : request.source_name();
  const cli::JobSpecResult parsed = cli::parse_job_spec(request.spec_yaml(), source);
  if (!parsed.ok()) {
    std::string message;
    for (const cli::JobSpecError& error : parsed.errors) {
      if (!message.empty()) message += "\n";
      message += error.to_string();
    }
    return {grpc::StatusCode::INVALID_ARGUMENT, message};
  }
  const absl::StatusOr<JobRecord> job =
      store_->create_job(parsed.spec->name, request.spec_yaml(), parsed.spec->train.steps);
  if (!job.ok()) return to_grpc(job.status());
  response.set_id(job->id);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  return finish(context, auth_, [&] { return submit(*request, *response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return finish(context, auth_,
                [&] { return reply_job(store_->get_job(request->id()), *response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  return finish(context, auth_, [&] {
    const absl::StatusOr<std::vector<JobRecord>> jobs = store_->list_jobs();
    if (!jobs.ok()) return to_grpc(jobs.status());
    for (const JobRecord& job : *jobs) {
      const auto& states = request->states();
      if (!states.empty() && std::find(states.begin(), states.end(), job.state) == states.end()) {
        continue;
      }
      to_proto(job, /*with_spec=*/false, *response->add_jobs());
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  return finish(context, auth_, [&] {
    return reply_job(
        store_->transition(request->id(), v1::JOB_STATE_CANCELLED, "cancelled by a client"),
        *response);
  });
}

}  // namespace mixtrain::server
