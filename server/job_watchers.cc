// Why: see job_watchers.h. Every push happens under the hub's lock, so the
// updates of one job reach each stream in the order they were committed.
#include "server/job_watchers.h"

#include <algorithm>

#include "server/job_proto.h"
#include "server/queued_writer.h"
#include "server/unary_call.h"

namespace mixtrain::server {
namespace {

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");

v1::LogLine to_proto(const LogRecord& record) {
  v1::LogLine line;
  line.set_attempt(record.attempt);
  line.set_rank(record.rank);
  line.set_unix_ms(record.unix_ms);
  line.set_text(record.text);
  line.set_seq(record.seq);
  return line;
}

}  // namespace

class JobWatch final : public QueuedWriter<v1::JobUpdate> {
 public:
  // Only the latest state matters: a newer one replaces an unsent one.
  JobWatch(JobWatchers* hub, std::string job_id)
      : QueuedWriter({.max_queued = 1, .keep_latest = true}),
        hub_(hub),
        job_id_(std::move(job_id)) {}
  const std::string& job_id() const { return job_id_; }
  std::string last_sent;  // the last Job sent, serialized without updated_unix_ms

 private:
  void on_done() override { hub_->forget(this); }
  JobWatchers* const hub_;
  const std::string job_id_;
};

// Reads the job's lines from the store a page at a time, after the last
// one it wrote, whenever it is idle and told of new lines: the store is
// its queue, so a client reading slowly costs one page, and lines reach it
// in the order they were stored even when the notices of two concurrent
// appends arrive the other way round.
class LogFollow final : public QueuedWriter<v1::LogLine> {
 public:
  LogFollow(JobWatchers* hub, JobDatabase* database, std::string job_id, int64_t after_seq)
      : hub_(hub), database_(database), job_id_(std::move(job_id)), last_seq_(after_seq) {}
  const std::string& job_id() const { return job_id_; }

 private:
  static constexpr int64_t kPageLines = 64;  // at most 1 MiB of 16 KiB lines

  void on_done() override { hub_->forget(this); }
  std::vector<v1::LogLine> refill() override {
    const absl::StatusOr<std::vector<LogRecord>> lines =
        database_->logs(job_id_, last_seq_, kPageLines);
    std::vector<v1::LogLine> page;
    if (!lines.ok()) return page;  // the store's error ends nothing: the next notice retries
    for (const LogRecord& line : *lines) page.push_back(to_proto(line));
    if (!lines->empty()) last_seq_ = lines->back().seq;
    return page;
  }

  JobWatchers* const hub_;
  JobDatabase* const database_;
  const std::string job_id_;
  int64_t last_seq_;  // of the newest line written; only refill touches it
};

grpc::ServerWriteReactor<v1::JobUpdate>* JobWatchers::watch(const std::string& job_id) {
  auto* watch = new JobWatch(this, job_id);
  absl::MutexLock lock(&mu_);
  if (closed_) {
    watch->finish(kShuttingDown);
    return watch;
  }
  const absl::StatusOr<JobRecord> record = database_->get_job(job_id);
  if (!record.ok()) {
    watch->finish(to_grpc(record.status()));
    return watch;
  }
  watches_[job_id].insert(watch);
  update_locked(*watch, *record);
  return watch;
}

void JobWatchers::update_locked(JobWatch& watch, const JobRecord& record) {
  v1::JobUpdate update;
  job_to_proto(record, /*full=*/true, *update.mutable_job());
  update.mutable_job()->clear_spec_yaml();
  v1::Job compared = update.job();
  compared.clear_updated_unix_ms();
  std::string serialized = compared.SerializeAsString();
  if (serialized != watch.last_sent) {
    if (watch.last_sent.empty()) update.mutable_job()->set_spec_yaml(record.spec_yaml);
    watch.last_sent = std::move(serialized);
    watch.push(std::move(update));
  }
  if (is_final_state(record.state)) watch.finish(grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::LogLine>* JobWatchers::stream_logs(
    const v1::StreamLogsRequest& request) {
  absl::MutexLock lock(&mu_);
  if (closed_) return new RefusedWriter<v1::LogLine>(kShuttingDown);
  const absl::StatusOr<JobRecord> job = database_->get_job(request.id());
  absl::StatusOr<int64_t> after_seq = request.after_seq();
  if (request.after_seq() <= 0) {
    after_seq = request.tail_lines() > 0
                    ? database_->seq_before_last(request.id(), request.tail_lines())
                    : int64_t{0};
  }
  if (!job.ok() || !after_seq.ok()) {
    return new RefusedWriter<v1::LogLine>(to_grpc(job.ok() ? after_seq.status() : job.status()));
  }
  auto* follow = new LogFollow(this, database_, request.id(), *after_seq);
  if (!request.follow() || is_final_state(job->state)) {
    follow->finish(grpc::Status::OK);  // after writing every stored line
  } else {
    follows_[request.id()].insert(follow);
    follow->pull();
  }
  return follow;
}

void JobWatchers::job_changed(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const auto watches = watches_.find(id);
  const auto follows = follows_.find(id);
  if (watches == watches_.end() && follows == follows_.end()) return;
  const absl::StatusOr<JobRecord> job = database_->get_job(id);
  if (!job.ok()) return;
  if (watches != watches_.end()) {
    for (JobWatch* watch : watches->second) update_locked(*watch, *job);
  }
  if (follows == follows_.end() || !is_final_state(job->state)) return;
  for (LogFollow* follow : follows->second) follow->finish(grpc::Status::OK);
}

void JobWatchers::log_appended(const std::string& id, const LogRecord&) {
  absl::MutexLock lock(&mu_);
  const auto follows = follows_.find(id);
  if (follows == follows_.end()) return;
  for (LogFollow* follow : follows->second) follow->pull();
}

void JobWatchers::close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (auto& [id, watches] : watches_) {
    for (JobWatch* watch : watches) watch->finish(kShuttingDown);
  }
  for (auto& [id, follows] : follows_) {
    for (LogFollow* follow : follows) follow->finish(kShuttingDown);
  }
}

void JobWatchers::forget(JobWatch* watch) {
  absl::MutexLock lock(&mu_);
  if (auto it = watches_.find(watch->job_id()); it != watches_.end()) {
    it->second.erase(watch);
    if (it->second.empty()) watches_.erase(it);
  }
}

void JobWatchers::forget(LogFollow* follow) {
  absl::MutexLock lock(&mu_);
  if (auto it = follows_.find(follow->job_id()); it != follows_.end()) {
    it->second.erase(follow);
    if (it->second.empty()) follows_.erase(it);
  }
}

}  // namespace mixtrain::server
