// Why: see job_watchers.h. Every push happens under the hub's lock, so the
// updates of one job reach each stream in the order they were committed.
#include "job_watchers.h"

#include <algorithm>

#include "job_proto.h"
#include "queued_writer.h"
#include "unary_call.h"

namespace mixtrain::server {
namespace {

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");

v1::LogLine to_proto(const LogRecord& record) {
  v1::LogLine line;
  line.set_attempt(record.attempt);
  line.set_rank(record.rank);
  line.set_unix_ms(record.unix_ms);
  line.set_text(record.text);
  return line;
}

}  // namespace

class JobWatch final : public QueuedWriter<v1::JobUpdate> {
 public:
  JobWatch(JobWatchers* hub, std::string job_id) : hub_(hub), job_id_(std::move(job_id)) {}
  const std::string& job_id() const { return job_id_; }
  std::string last_sent;  // the last Job sent, serialized without updated_unix_ms

 private:
  void on_done() override { hub_->forget(this); }
  JobWatchers* const hub_;
  const std::string job_id_;
};

class LogFollow final : public QueuedWriter<v1::LogLine> {
 public:
  LogFollow(JobWatchers* hub, std::string job_id) : hub_(hub), job_id_(std::move(job_id)) {}
  const std::string& job_id() const { return job_id_; }
  int64_t last_seq = 0;  // of the newest line sent

 private:
  void on_done() override { hub_->forget(this); }
  JobWatchers* const hub_;
  const std::string job_id_;
};

grpc::ServerWriteReactor<v1::JobUpdate>* JobWatchers::watch(const std::string& job_id) {
  auto* watch = new JobWatch(this, job_id);
  absl::MutexLock lock(&mu_);
  if (closed_) {
    watch->finish(kShuttingDown);
    return watch;
  }
  watches_[job_id].insert(watch);
  update_locked(*watch);
  return watch;
}

void JobWatchers::update_locked(JobWatch& watch) {
  const absl::StatusOr<JobRecord> record = store_->get_job(watch.job_id());
  if (!record.ok()) {
    watch.finish(to_grpc(record.status()));
    return;
  }
  v1::JobUpdate update;
  job_to_proto(*record, /*full=*/true, *update.mutable_job());
  v1::Job compared = update.job();
  compared.clear_updated_unix_ms();
  std::string serialized = compared.SerializeAsString();
  if (serialized != watch.last_sent) {
    watch.last_sent = std::move(serialized);
    watch.push(std::move(update));
  }
  if (is_final_state(record->state)) watch.finish(grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::LogLine>* JobWatchers::stream_logs(
    const v1::StreamLogsRequest& request) {
  auto* follow = new LogFollow(this, request.id());
  absl::MutexLock lock(&mu_);
  if (closed_) {
    follow->finish(kShuttingDown);
    return follow;
  }
  const absl::StatusOr<JobRecord> job = store_->get_job(request.id());
  absl::StatusOr<std::vector<LogRecord>> lines = store_->logs(request.id());
  if (!job.ok() || !lines.ok()) {
    follow->finish(to_grpc(job.ok() ? lines.status() : job.status()));
    return follow;
  }
  const size_t skip = request.tail_lines() > 0 && lines->size() > size_t(request.tail_lines())
                          ? lines->size() - request.tail_lines()
                          : 0;
  for (size_t i = skip; i < lines->size(); ++i) follow->push(to_proto((*lines)[i]));
  if (!lines->empty()) follow->last_seq = lines->back().seq;
  if (!request.follow() || is_final_state(job->state)) {
    follow->finish(grpc::Status::OK);
  } else {
    follows_[request.id()].insert(follow);
  }
  return follow;
}

void JobWatchers::job_changed(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (const auto watches = watches_.find(id); watches != watches_.end()) {
    for (JobWatch* watch : watches->second) update_locked(*watch);
  }
  const auto follows = follows_.find(id);
  if (follows == follows_.end()) return;
  const absl::StatusOr<JobRecord> job = store_->get_job(id);
  if (job.ok() && !is_final_state(job->state)) return;
  for (LogFollow* follow : follows->second) follow->finish(grpc::Status::OK);
}

void JobWatchers::log_appended(const std::string& id, const LogRecord& line) {
  absl::MutexLock lock(&mu_);
  const auto follows = follows_.find(id);
  if (follows == follows_.end()) return;
  for (LogFollow* follow : follows->second) {
    if (line.seq <= follow->last_seq) continue;
    follow->last_seq = line.seq;
    follow->push(to_proto(line));
  }
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
