// Why: the coordinator's Prometheus metrics (DESIGN.md §7) in one place:
// counters and the schedule latency histogram are fed as things happen, the
// job and worker gauges are set from the current counts at each scrape.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>

#include "proto/mixtrain.pb.h"

namespace mixtrain::server {

// Thread safe.
class CoordinatorMetrics {
 public:
  // `version` labels mixtrain_build_info.
  explicit CoordinatorMetrics(const std::string& version);

  // mixtrain_jobs_submitted_total += 1.
  void job_submitted() { submitted_.Increment(); }
  // mixtrain_job_restarts_total += 1.
  void job_restarted() { restarts_.Increment(); }
  // mixtrain_job_preemptions_total += 1.
  void job_preempted() { preemptions_.Increment(); }
  // Observes mixtrain_schedule_latency_seconds (queued → started).
  void job_started(double queued_seconds) { schedule_latency_.Observe(queued_seconds); }
  // Observes mixtrain_scheduler_pass_cpu_seconds: the CPU time of one pass
  // of the scheduler's loop (liveness, placement, starts).
  void scheduler_pass(double cpu_seconds) { scheduler_pass_.Observe(cpu_seconds); }
  // mixtrain_log_store_reads_total += 1: a StreamLogs follower read a page
  // of its job's log from the store (caught-up followers get new lines
  // without one).
  void log_page_read() { log_page_reads_.Increment(); }

  // The Prometheus text exposition, with mixtrain_jobs{state} and
  // mixtrain_workers{state} set from these counts (missing states are 0).
  std::string render(const std::map<v1::JobState, int64_t>& jobs,
                     const std::map<v1::WorkerState, int>& workers);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Counter& submitted_;
  prometheus::Counter& restarts_;
  prometheus::Counter& preemptions_;
  prometheus::Histogram& schedule_latency_;
  prometheus::Histogram& scheduler_pass_;
  prometheus::Counter& log_page_reads_;
};

}  // namespace mixtrain::server
