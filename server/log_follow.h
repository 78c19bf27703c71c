// Why: a StreamLogs follower must cost nothing while its client does not
// read, and appending a line must never wait on a follower (issue 29: 300
// stalled `logs -f` clients made every append query the store once per
// follower, under the hub's lock, and the scheduler, waiting on the store,
// let heartbeats fail). A follower keeps the seq of the newest line it has
// (written or read) and of the newest one it was told of. A new line goes
// straight to a follower that is idle and has every line before it, from
// memory; a follower that is behind (its client has not read, or it just
// started) reads the store from its seq, a page at a time, only once its
// client has taken what it was sent: in a gRPC thread, holding no lock.
// Lines reach it once each, in the order they were stored.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <string>

#include "proto/mixtrain.pb.h"
#include "server/coordinator_metrics.h"
#include "server/job_database.h"

namespace mixtrain::server {

class JobWatchers;

class LogFollow final : public grpc::ServerWriteReactor<v1::LogLine> {
 public:
  // Follows `job_id`'s log after the line `after_seq`. Tells `hub` (forget)
  // once the call is over, before deleting itself; counts each page read
  // from `database` in `metrics`.
  LogFollow(JobWatchers* hub, JobDatabase* database, CoordinatorMetrics* metrics,
            std::string job_id, int64_t after_seq)
      : hub_(hub),
        database_(database),
        metrics_(metrics),
        job_id_(std::move(job_id)),
        have_seq_(after_seq) {}

  const std::string& job_id() const { return job_id_; }

  // Starts writing the stored lines. Called once, by whoever created it,
  // holding no lock.
  void start() { advance(); }

  // `line` of this job was stored after its line `previous_seq` (0: its
  // first). Never reads the store nor waits on the client: writes the line
  // when idle with every line before it, else only notes it is behind.
  void line_appended(const LogRecord& line, int64_t previous_seq);

  // Finishes with `status` once every line stored by now is written. Only
  // the first call counts. Reads no store: true when that final read is
  // due, and the caller must then call read_store() once it holds no lock
  // (the follower stays until then).
  [[nodiscard]] bool finish(grpc::Status status);
  // Reads the store as finish() asked, and goes on.
  void read_store() { run(Next::kRead); }

 private:
  static constexpr int64_t kPageLines = 64;  // at most 1 MiB of 16 KiB lines
  enum class Next { kIdle, kWrite, kRead, kFinish };

  // run() with whatever is due.
  void advance();
  // Does `next` (claimed by next_locked), then whatever is due after it,
  // until it must wait (a write in flight, nothing new). Holds no lock
  // while reading the store or calling gRPC.
  void run(Next next);
  // What advance() does next; claims the write, read or finish it returns.
  Next next_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the page read from the store (or ends the call on its error).
  void take_page_locked(const absl::StatusOr<std::vector<LogRecord>>& page)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the call with `status` without writing anything more.
  void end_locked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  JobWatchers* const hub_;
  JobDatabase* const database_;
  CoordinatorMetrics* const metrics_;
  const std::string job_id_;

  absl::Mutex mu_;
  // The newest line written, being written or in page_; and the newest one
  // it was told of. Behind while told_seq_ > have_seq_.
  int64_t have_seq_ ABSL_GUARDED_BY(mu_);
  int64_t told_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The store may hold lines after have_seq_ it was not told of: at the
  // start, after a full page, and when finishing.
  bool read_store_ ABSL_GUARDED_BY(mu_) = true;
  std::deque<v1::LogLine> page_ ABSL_GUARDED_BY(mu_);  // read, not written yet
  v1::LogLine current_;  // the line being written; only the writer in flight touches it
  // Where the claimed read starts, and told_seq_ then; only its reader
  // touches them.
  int64_t read_after_ = 0;
  int64_t read_told_ = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // finish asked for (or the call broke)
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish called
  bool broken_ ABSL_GUARDED_BY(mu_) = false;     // nothing more may be written
  grpc::Status status_ ABSL_GUARDED_BY(mu_);     // set when finishing_ becomes true
};

}  // namespace mixtrain::server
