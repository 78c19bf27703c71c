// Why: see job_service.h.
#include "server/job_service.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <map>
#include <string>

#include "engine/common/error.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "jobspec/job_spec_yaml.h"
#include "net/error_status.h"
#include "proto/training_device.h"
#include "server/job_proto.h"
#include "server/placement.h"
#include "server/queued_writer.h"
#include "server/spec_paths.h"
#include "server/unary_call.h"

namespace mixtrain::server {
namespace {

// Writes the job into `response`, or returns the store's error.
grpc::Status reply_job(const absl::StatusOr<JobRecord>& record, v1::Job& response) {
  if (!record.ok()) return to_grpc(record.status());
  job_to_proto(*record, /*full=*/true, response);
  return grpc::Status::OK;
}

// ListJobs pages: the default and largest number of jobs, and the bytes
// after which a page stops (a client accepts 4 MiB; a job's message may
// hold 64 KiB).
constexpr int64_t kDefaultJobsPage = 100;
constexpr int64_t kMaxJobsPage = 1000;
constexpr size_t kMaxJobsPageBytes = 2 << 20;

}  // namespace

grpc::Status JobServiceImpl::submit(const v1::SubmitJobRequest& request,
                                    v1::SubmitJobResponse& response) {
  const std::string source = request.source_name().empty() ? "job.yaml" : request.source_name();
  jobspec::JobSpecOptions options;
  options.overrides.assign(request.overrides().begin(), request.overrides().end());
  const jobspec::JobSpecResult parsed =
      jobspec::parse_job_spec(request.spec_yaml(), source, options);
  std::vector<std::string> problems;
  for (const jobspec::JobSpecError& error : parsed.errors) problems.push_back(error.to_string());
  if (parsed.ok()) {
    for (const std::string& problem : check_spec_paths(*parsed.spec, data_root_)) {
      problems.push_back(source + ": " + problem);
    }
  }
  if (!problems.empty()) {  // finish_unary keeps the first ones (error_text.h)
    return {grpc::StatusCode::INVALID_ARGUMENT, absl::StrJoin(problems, "\n")};
  }
  JobNeeds needs;
  try {
    needs = job_needs(*parsed.spec);
  } catch (const EngineError& e) {  // a shape too large to plan
    return to_grpc(net::to_status(e, source + ": "));
  }
  const std::vector<v1::Worker> workers = scheduler_->list_workers();
  for (const std::string& why :
       {device_refusal(needs, workers), memory_refusal(*parsed.spec, needs, workers)}) {
    if (!why.empty()) return {grpc::StatusCode::INVALID_ARGUMENT, source + ": " + why};
  }
  std::string spec_json;
  try {
    spec_json = dump_json(config::job_spec_to_json(*parsed.spec));
  } catch (const EngineError& e) {  // a value JSON cannot carry that validation let through
    return to_grpc(net::to_status(e, source + ": "));
  }
  const absl::StatusOr<JobRecord> job = database_->create_job(
      parsed.spec->name, request.spec_yaml(), spec_json, parsed.spec->train.steps, needs);
  if (!job.ok()) return to_grpc(job.status());
  metrics_->job_submitted();
  scheduler_->wake();
  response.set_id(job->id);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::list(const v1::ListJobsRequest& request,
                                  v1::ListJobsResponse& response) {
  JobListing listing;
  for (const int state : request.states()) listing.states.push_back(v1::JobState(state));
  listing.limit = request.page_size() <= 0 ? kDefaultJobsPage
                                           : std::min<int64_t>(request.page_size(), kMaxJobsPage);
  if (!request.page_token().empty()) {
    const std::string& token = request.page_token();
    const bool digits = token.size() <= 18 && std::all_of(token.begin(), token.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    listing.before = digits ? std::stoll(token) : 0;
    if (listing.before <= 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "ListJobsRequest.page_token is not one ListJobs gave out: pass next_page_token "
              "as it came, or none for the first page"};
    }
  }
  const int64_t page_size = listing.limit;
  ++listing.limit;  // one more tells whether another page follows
  const absl::StatusOr<std::vector<ListedJob>> jobs = database_->list_jobs(listing);
  if (!jobs.ok()) return to_grpc(jobs.status());
  for (int64_t i = 0; i < int64_t(jobs->size()); ++i) {
    const bool full = i == page_size || response.ByteSizeLong() >= kMaxJobsPageBytes;
    if (full) {
      response.set_next_page_token(std::to_string((*jobs)[size_t(i) - 1].position));
      break;
    }
    job_to_proto((*jobs)[size_t(i)].job, /*full=*/false, *response.add_jobs());
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::get(const std::string& id, v1::Job& response) {
  if (grpc::Status status = reply_job(database_->get_job(id), response); !status.ok())
    return status;
  const absl::StatusOr<std::vector<JobEventRecord>> events = database_->events(id);
  if (!events.ok()) return to_grpc(events.status());
  for (const JobEventRecord& event : *events) {
    v1::JobEvent& added = *response.add_events();
    added.set_unix_ms(event.unix_ms);
    added.set_state(event.state);
    added.set_message(event.message);
  }
  std::map<std::string, std::string> devices;  // worker id -> device
  for (const v1::Worker& worker : scheduler_->list_workers()) {
    devices[worker.id()] = v1::training_device_name(worker.resources());
  }
  for (const std::string& worker : response.workers()) response.add_devices(devices[worker]);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  return finish_unary(context, auth_, *request, [&] { return submit(*request, *response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return finish_unary(context, auth_, *request, [&] { return get(request->id(), *response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  return finish_unary(context, auth_, *request, [&] { return list(*request, *response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  return finish_unary(context, auth_, *request,
                      [&] { return reply_job(scheduler_->cancel_job(request->id()), *response); });
}

grpc::ServerWriteReactor<v1::JobUpdate>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  if (grpc::Status status = admit(*context, auth_, *request); !status.ok()) {
    return new RefusedWriter<v1::JobUpdate>(status);
  }
  return watchers_->watch(request->id());
}

grpc::ServerWriteReactor<v1::LogLine>* JobServiceImpl::StreamLogs(
    grpc::CallbackServerContext* context, const v1::StreamLogsRequest* request) {
  if (grpc::Status status = admit(*context, auth_, *request); !status.ok()) {
    return new RefusedWriter<v1::LogLine>(status);
  }
  return watchers_->stream_logs(*request);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  return finish_unary(context, auth_, *request, [&] {
    if (request->page_size() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "page_size " + std::to_string(request->page_size()) + " is negative");
    }
    // A worker is at most about 24 KiB (64 GPUs with 256-byte names, 1 KiB
    // strings), so a page stays below a client's default 4 MiB limit.
    constexpr size_t kDefaultWorkersPage = 50;
    constexpr size_t kMaxWorkersPage = 100;
    // The token is the registration seq of the page's first worker.
    uint64_t from_seq = 0;
    if (!request->page_token().empty() &&
        (!absl::SimpleAtoi(request->page_token(), &from_seq) || from_seq == 0)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "page_token '" + request->page_token() +
                              "' is not a next_page_token this coordinator gave");
    }
    const size_t size = request->page_size() == 0
                            ? kDefaultWorkersPage
                            : std::min<size_t>(size_t(request->page_size()), kMaxWorkersPage);
    uint64_t next_seq = 0;
    for (v1::Worker& worker : scheduler_->list_workers(from_seq, size, next_seq)) {
      *response->add_workers() = std::move(worker);
    }
    if (next_seq != 0) response->set_next_page_token(std::to_string(next_seq));
    return grpc::Status::OK;
  });
}

}  // namespace mixtrain::server
