// Why: finished jobs and their logs piled up forever (issue 29: 60,000 jobs
// made a list take 3 s and 280 MB; at 200,000 `mixtrain jobs` failed). The
// coordinator deletes the finished jobs it no longer keeps, with their
// logs, events and attempts: those that finished more than
// --retain-finished-days ago, and those past the newest
// --retain-finished-jobs. It does so once at start and then every
// kRetentionInterval, a few thousand rows per transaction so that other
// calls get the store in between, and never touches a QUEUED, RUNNING or
// PREEMPTED job.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "server/job_database.h"

namespace mixtrain::server {

struct RetentionOptions {
  int64_t finished_days = 30;       // 0: no age limit
  int64_t finished_jobs = 100'000;  // 0: no count limit
};

inline constexpr std::chrono::minutes kRetentionInterval{10};

class HistoryRetention {
 public:
  // `database` must outlive it. Does nothing until start().
  HistoryRetention(JobDatabase* database, RetentionOptions options)
      : database_(database), options_(options) {}
  ~HistoryRetention() { stop(); }
  HistoryRetention(const HistoryRetention&) = delete;
  HistoryRetention& operator=(const HistoryRetention&) = delete;

  // Deletes, now, every finished job the options do not keep; returns how
  // many jobs and log lines, or the store's error.
  absl::StatusOr<int64_t> delete_expired();

  // Starts a thread that calls delete_expired() now and then every
  // kRetentionInterval (a failure is logged and retried then).
  void start();
  // Stops that thread. Idempotent.
  void stop();

 private:
  void run();

  JobDatabase* const database_;
  const RetentionOptions options_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mixtrain::server
