// Why: the JobService of mixtrain.proto, through which clients submit and
// manage jobs. Every call is checked against the bearer token first and
// answers with a gRPC status instead of ever throwing or exiting; job state
// lives only in the JobDatabase, running attempts in the Scheduler.
#pragma once

#include <cstddef>
#include <filesystem>
#include <utility>

#include "proto/mixtrain.grpc.pb.h"
#include "server/bearer_auth.h"
#include "server/coordinator_metrics.h"
#include "server/job_database.h"
#include "server/job_watchers.h"
#include "server/scheduler.h"

namespace mixtrain::server {

// Specs larger than this are refused before parsing.
inline constexpr size_t kMaxSpecBytes = 64 * 1024;

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // Every pointer must outlive the service; `data_root` is absolute and
  // canonical: the files a spec names must be inside it.
  JobServiceImpl(JobDatabase* database, Scheduler* scheduler, JobWatchers* watchers,
                 CoordinatorMetrics* metrics, BearerAuth auth, std::filesystem::path data_root)
      : database_(database),
        scheduler_(scheduler),
        watchers_(watchers),
        metrics_(metrics),
        auth_(std::move(auth)),
        data_root_(std::move(data_root)) {}

  // INVALID_ARGUMENT with every problem of the spec, one per line
  // ("job.yaml:7: model.heads: must divide model.dim (384), got 5"), or
  // naming the key of a file outside the data root or a checkpoint.dir.
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  // The job with its spec, summary and events; NOT_FOUND for an unknown id.
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  // A page of jobs, newest first, without spec or summary (mixtrain.proto);
  // INVALID_ARGUMENT for a page token it did not give out.
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  // Cancels a queued job, or a running one after telling every rank to stop.
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  // The job now, then every change until it is final.
  grpc::ServerWriteReactor<v1::JobUpdate>* WatchJob(grpc::CallbackServerContext* context,
                                                    const v1::WatchJobRequest* request) override;
  // The stored log lines, then (follow) new ones until the job is final.
  grpc::ServerWriteReactor<v1::LogLine>* StreamLogs(grpc::CallbackServerContext* context,
                                                    const v1::StreamLogsRequest* request) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

 private:
  grpc::Status submit(const v1::SubmitJobRequest& request, v1::SubmitJobResponse& response);
  grpc::Status get(const std::string& id, v1::Job& response);
  grpc::Status list(const v1::ListJobsRequest& request, v1::ListJobsResponse& response);

  JobDatabase* const database_;
  Scheduler* const scheduler_;
  JobWatchers* const watchers_;
  CoordinatorMetrics* const metrics_;
  const BearerAuth auth_;
  const std::filesystem::path data_root_;
};

}  // namespace mixtrain::server
