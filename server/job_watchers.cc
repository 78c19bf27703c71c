// Why: see job_watchers.h. Every push happens under the hub's lock, so the
// updates of one job reach each stream in the order they were committed;
// log lines are ordered by their followers (log_follow.h).
#include "server/job_watchers.h"

#include <algorithm>

#include "server/job_proto.h"
#include "server/log_follow.h"
#include "server/queued_writer.h"
#include "server/unary_call.h"

namespace mixtrain::server {
namespace {

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");

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
  // The store is read before taking the hub's lock: appends and job
  // changes take it, so it is never held while waiting for the store.
  const absl::StatusOr<JobRecord> job = database_->get_job(request.id());
  absl::StatusOr<int64_t> after_seq = request.after_seq();
  if (job.ok() && request.after_seq() <= 0) {
    after_seq = request.tail_lines() > 0
                    ? database_->seq_before_last(request.id(), request.tail_lines())
                    : int64_t{0};
  }
  if (!job.ok() || !after_seq.ok()) {
    return new RefusedWriter<v1::LogLine>(to_grpc(job.ok() ? after_seq.status() : job.status()));
  }
  const bool following = request.follow() && !is_final_state(job->state);
  LogFollow* follow = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return new RefusedWriter<v1::LogLine>(kShuttingDown);
    follow = new LogFollow(this, database_, metrics_, request.id(), *after_seq);
    if (following) follows_[request.id()].insert(follow);
  }
  if (!following) {
    if (follow->finish(grpc::Status::OK)) follow->read_store();  // every stored line, then OK
    return follow;
  }
  follow->start();
  // Its job may have ended before it was registered, unseen by job_changed.
  if (const absl::StatusOr<JobRecord> now = database_->get_job(request.id());
      now.ok() && is_final_state(now->state)) {
    std::vector<LogFollow*> reading;
    {
      absl::MutexLock lock(&mu_);
      if (const auto follows = follows_.find(request.id());
          follows != follows_.end() && follows->second.contains(follow)) {
        reading = finish_locked({follow}, grpc::Status::OK);
      }
    }
    for (LogFollow* finishing : reading) finishing->read_store();
  }
  return follow;
}

void JobWatchers::job_changed(const std::string& id) {
  std::vector<LogFollow*> reading;
  {
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
    reading = finish_locked(follows->second, grpc::Status::OK);
  }
  for (LogFollow* follow : reading) follow->read_store();
}

std::vector<LogFollow*> JobWatchers::finish_locked(const std::set<LogFollow*>& follows,
                                                   const grpc::Status& status) {
  std::vector<LogFollow*> reading;
  for (LogFollow* follow : follows) {
    if (follow->finish(status)) reading.push_back(follow);
  }
  return reading;
}

void JobWatchers::log_appended(const std::string& id, const LogRecord& line,
                               int64_t previous_seq) {
  absl::MutexLock lock(&mu_);
  const auto follows = follows_.find(id);
  if (follows == follows_.end()) return;
  for (LogFollow* follow : follows->second) follow->line_appended(line, previous_seq);
}

void JobWatchers::close() {
  absl::ReleasableMutexLock lock(&mu_);
  closed_ = true;
  for (auto& [id, watches] : watches_) {
    for (JobWatch* watch : watches) watch->finish(kShuttingDown);
  }
  std::vector<LogFollow*> reading;
  for (auto& [id, follows] : follows_) {
    for (LogFollow* follow : finish_locked(follows, kShuttingDown)) reading.push_back(follow);
  }
  lock.Release();
  for (LogFollow* follow : reading) follow->read_store();
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
