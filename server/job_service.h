// Why: the JobService of mixtrain.proto, through which clients submit and
// manage jobs. Every call is checked against the bearer token first and
// answers with a gRPC status instead of ever throwing or exiting; job state
// lives only in the JobStore.
#pragma once

#include <cstddef>
#include <utility>

#include "bearer_auth.h"
#include "job_store.h"
#include "mixtrain.grpc.pb.h"

namespace mixtrain::server {

// Specs larger than this are refused before parsing.
inline constexpr size_t kMaxSpecBytes = 64 * 1024;

// Serves SubmitJob, GetJob, ListJobs and CancelJob; WatchJob and StreamLogs
// answer UNIMPLEMENTED until they are written.
class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `store` must outlive the service.
  JobServiceImpl(JobStore* store, BearerAuth auth) : store_(store), auth_(std::move(auth)) {}

  // INVALID_ARGUMENT with every problem of the spec, one per line
  // ("job.yaml:7: model.heads: must divide model.dim (384), got 5").
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;

 private:
  grpc::Status submit(const v1::SubmitJobRequest& request, v1::SubmitJobResponse& response);

  JobStore* const store_;
  const BearerAuth auth_;
};

}  // namespace mixtrain::server
