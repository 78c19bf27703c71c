// Why: see history_retention.h.
#include "server/history_retention.h"

#include <iostream>

#include "server/ids.h"

namespace mixtrain::server {
namespace {

// Jobs and log lines deleted per transaction: the store's lock is held
// for a few milliseconds at a time, whatever the history holds.
constexpr int64_t kBatchRows = 2000;
constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;

}  // namespace

absl::StatusOr<int64_t> HistoryRetention::delete_expired() {
  const FinishedJobRetention retention{
      .ended_before_unix_ms =
          options_.finished_days > 0 ? now_unix_ms() - options_.finished_days * kDayMs : 0,
      .keep_newest = options_.finished_jobs};
  int64_t deleted = 0;
  while (true) {
    const absl::StatusOr<int64_t> batch = database_->delete_finished_jobs(retention, kBatchRows);
    if (!batch.ok()) return batch.status();
    deleted += *batch;
    if (*batch == 0) return deleted;
  }
}

void HistoryRetention::start() {
  if (options_.finished_days <= 0 && options_.finished_jobs <= 0) return;  // keeps everything
  thread_ = std::thread([this] { run(); });
}

void HistoryRetention::stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void HistoryRetention::run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.Unlock();
    const absl::StatusOr<int64_t> deleted = delete_expired();
    if (!deleted.ok()) {
      std::cerr << "mixtrain-coordinator: cannot delete expired finished jobs ("
                << deleted.status() << "); retrying in " << kRetentionInterval.count()
                << " minutes" << std::endl;
    }
    mu_.Lock();
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(kRetentionInterval));
  }
}

}  // namespace mixtrain::server
