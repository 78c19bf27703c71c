// Why: see coordinator_metrics.h. States are labelled in lower case
// ("queued", "idle"), as the CLI shows them.
#include "server/coordinator_metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

#include <absl/strings/ascii.h>

namespace mixtrain::server {
namespace {

// "JOB_STATE_QUEUED" → "queued".
std::string state_label(const std::string& enum_name, const std::string& prefix) {
  return absl::AsciiStrToLower(enum_name.substr(prefix.size()));
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      jobs_(prometheus::BuildGauge()
                .Name("mixtrain_jobs")
                .Help("Jobs by state")
                .Register(*registry_)),
      workers_(prometheus::BuildGauge()
                   .Name("mixtrain_workers")
                   .Help("Registered workers by state")
                   .Register(*registry_)),
      submitted_(prometheus::BuildCounter()
                     .Name("mixtrain_jobs_submitted_total")
                     .Help("Jobs accepted by SubmitJob")
                     .Register(*registry_)
                     .Add({})),
      restarts_(prometheus::BuildCounter()
                    .Name("mixtrain_job_restarts_total")
                    .Help("Times a job was requeued after a failed attempt")
                    .Register(*registry_)
                    .Add({})),
      preemptions_(prometheus::BuildCounter()
                       .Name("mixtrain_job_preemptions_total")
                       .Help("Times a running job was preempted for a higher-priority one")
                       .Register(*registry_)
                       .Add({})),
      schedule_latency_(
          prometheus::BuildHistogram()
              .Name("mixtrain_schedule_latency_seconds")
              .Help("Time from queued to started")
              .Register(*registry_)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30,
                                                               60, 300, 1800})),
      scheduler_pass_(prometheus::BuildHistogram()
                          .Name("mixtrain_scheduler_pass_cpu_seconds")
                          .Help("CPU time of one pass of the scheduler loop")
                          .Register(*registry_)
                          .Add({}, prometheus::Histogram::BucketBoundaries{
                                       1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 1})),
      log_page_reads_(prometheus::BuildCounter()
                          .Name("mixtrain_log_store_reads_total")
                          .Help("Pages of job log read from the store for StreamLogs followers")
                          .Register(*registry_)
                          .Add({})) {
  prometheus::BuildGauge()
      .Name("mixtrain_build_info")
      .Help("The coordinator's version")
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
}

std::string CoordinatorMetrics::render(const std::map<v1::JobState, int64_t>& jobs,
                                       const std::map<v1::WorkerState, int>& workers) {
  for (int state = v1::JOB_STATE_QUEUED; state <= v1::JobState_MAX; ++state) {
    const auto count = jobs.find(v1::JobState(state));
    jobs_.Add({{"state", state_label(v1::JobState_Name(v1::JobState(state)), "JOB_STATE_")}})
        .Set(count == jobs.end() ? 0 : count->second);
  }
  for (int state = v1::WORKER_STATE_IDLE; state <= v1::WorkerState_MAX; ++state) {
    const auto count = workers.find(v1::WorkerState(state));
    workers_
        .Add(
            {{"state", state_label(v1::WorkerState_Name(v1::WorkerState(state)), "WORKER_STATE_")}})
        .Set(count == workers.end() ? 0 : count->second);
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace mixtrain::server
