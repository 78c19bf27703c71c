// Why: see reporter.h.
#include "worker/reporter.h"

#include <iostream>

#include "net/backoff.h"
#include "proto/running_task.h"

namespace mixtrain::worker {
namespace {

constexpr std::chrono::milliseconds kCallTimeout{10000};
constexpr size_t kMaxLinesPerCall = 500;

// Worth trying again: the coordinator is away, slow, or restarted and
// does not know this worker yet.
bool retryable(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
      return true;
    default:
      return false;
  }
}

}  // namespace

Reporter::Reporter(WorkerConnection& connection,
                   std::function<void(const std::string&)> on_unknown_worker,
                   std::function<void(std::chrono::steady_clock::time_point)> on_counted)
    : connection_(connection),
      on_unknown_worker_(std::move(on_unknown_worker)),
      on_counted_(std::move(on_counted)) {
  thread_ = std::thread([this] { run(); });
}

Reporter::~Reporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void Reporter::set_worker_id(const std::string& id) {
  absl::MutexLock lock(&mu_);
  worker_id_ = id;
  wake_ = true;
}

Reporter::Pending& Reporter::pending_for(const v1::RunningTask& task) {
  for (Pending& p : pending_)
    if (same_task(p.task, task)) return p;
  Pending& added = pending_.emplace_back();
  added.task = task;
  return added;
}

void Reporter::progress(const v1::RunningTask& task, const v1::Progress& progress) {
  absl::MutexLock lock(&mu_);
  Pending& p = pending_for(task);
  p.progress = progress;
  p.progress_unsent = true;
  wake_ = true;
}

void Reporter::log(const v1::RunningTask& task, std::string line) {
  absl::MutexLock lock(&mu_);
  Pending& p = pending_for(task);
  if (p.lines.empty()) p.oldest_line = Clock::now();
  p.lines.push_back(std::move(line));
  if (p.lines.size() > kMaxQueuedLines) {
    p.lines.pop_front();
    ++p.dropped_lines;
  }
  if (p.lines.size() >= kLogBatch) wake_ = true;
}

void Reporter::finish(const v1::RunningTask& task, v1::TaskOutcome outcome,
                      const std::string& message, const std::string& summary_json) {
  absl::MutexLock lock(&mu_);
  Pending& p = pending_for(task);
  p.final = Final{outcome, message, summary_json};
  wake_ = true;
}

bool Reporter::flush(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  flushing_ = true;
  wake_ = true;
  const bool done = mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Reporter* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return r->nothing_to_send(); }, this),
      absl::FromChrono(timeout));
  flushing_ = false;
  return done;
}

std::vector<v1::RunningTask> Reporter::unreported_finals() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::RunningTask> tasks;
  if (final_in_flight_) tasks.push_back(*final_in_flight_);
  for (const Pending& p : pending_)
    if (p.final) tasks.push_back(p.task);
  return tasks;
}

bool Reporter::nothing_to_send() const {
  if (in_flight_) return false;
  for (const Pending& p : pending_)
    if (!p.lines.empty() || p.progress_unsent || p.final) return false;
  return true;
}

std::optional<Reporter::Call> Reporter::next_call(Clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    Pending& p = *it;
    if (!p.lines.empty() && (flushing_ || p.final || p.lines.size() >= kLogBatch ||
                             now - p.oldest_line >= kLogInterval)) {
      Call call{Call::Kind::kLog, {}, {}};
      call.log.set_worker_id(worker_id_);
      *call.log.mutable_task() = p.task;
      if (p.dropped_lines > 0) {
        call.log.add_lines("[mixtrain-worker: " + std::to_string(p.dropped_lines) +
                           " lines dropped while the coordinator was unreachable]");
        p.dropped_lines = 0;
      }
      while (!p.lines.empty() && static_cast<size_t>(call.log.lines_size()) < kMaxLinesPerCall) {
        call.log.add_lines(std::move(p.lines.front()));
        p.lines.pop_front();
      }
      p.oldest_line = now;
      return call;
    }
    if (p.final && p.lines.empty()) {
      Call call{Call::Kind::kFinal, {}, {}};
      v1::ReportProgressRequest& request = call.progress;
      request.set_worker_id(worker_id_);
      *request.mutable_task() = p.task;
      *request.mutable_progress() = p.progress;
      request.set_outcome(p.final->outcome);
      request.set_message(p.final->message);
      request.set_summary_json(p.final->summary_json);
      pending_.erase(it);
      return call;
    }
    if (p.progress_unsent && !p.final &&
        (flushing_ || now - p.progress_sent >= kProgressInterval)) {
      Call call{Call::Kind::kProgress, {}, {}};
      call.progress.set_worker_id(worker_id_);
      *call.progress.mutable_task() = p.task;
      *call.progress.mutable_progress() = p.progress;
      call.progress.set_outcome(v1::TASK_OUTCOME_RUNNING);
      p.progress_unsent = false;
      p.progress_sent = now;
      return call;
    }
  }
  return std::nullopt;
}

void Reporter::restore(const Call& call) {
  switch (call.kind) {
    case Call::Kind::kLog: {
      Pending& p = pending_for(call.log.task());
      for (int i = call.log.lines_size() - 1; i >= 0; --i) p.lines.push_front(call.log.lines(i));
      p.oldest_line = Clock::now() - kLogInterval;  // due again at once
      break;
    }
    case Call::Kind::kProgress: {
      Pending& p = pending_for(call.progress.task());
      p.progress_unsent = true;  // p.progress is this or a newer one
      p.progress_sent = Clock::time_point();
      break;
    }
    case Call::Kind::kFinal: {
      Pending& p = pending_.emplace_front();  // a final call took its task's entry out
      p.task = call.progress.task();
      p.progress = call.progress.progress();
      p.final =
          Final{call.progress.outcome(), call.progress.message(), call.progress.summary_json()};
      break;
    }
  }
}

grpc::Status Reporter::send(const Call& call, bool& counted) {
  grpc::ClientContext context;
  connection_.prepare(context, kCallTimeout);
  counted = false;
  if (call.kind == Call::Kind::kLog) {
    v1::ReportLogResponse response;
    return connection_.stub().ReportLog(&context, call.log, &response);
  }
  v1::ReportProgressResponse response;
  const grpc::Status status = connection_.stub().ReportProgress(&context, call.progress, &response);
  counted = status.ok() && response.counted();
  return status;
}

void Reporter::run() {
  net::Backoff backoff;
  mu_.Lock();
  while (!stopping_) {
    std::optional<Call> call;
    if (!worker_id_.empty()) call = next_call(Clock::now());
    if (!call) {
      wake_ = false;
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](Reporter* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return r->wake_ || r->stopping_; },
              this),
          absl::Milliseconds(100));
      continue;
    }
    in_flight_ = true;
    if (call->kind == Call::Kind::kFinal) final_in_flight_ = call->progress.task();
    mu_.Unlock();
    const Clock::time_point sent = Clock::now();
    bool counted = false;
    const grpc::Status status = send(*call, counted);
    if (counted && on_counted_) on_counted_(sent);
    mu_.Lock();
    in_flight_ = false;
    final_in_flight_.reset();
    if (status.ok()) {
      backoff.reset();
      continue;
    }
    if (!retryable(status)) {
      std::cerr << "mixtrain-worker: the coordinator refused a report of job "
                << (call->kind == Call::Kind::kLog ? call->log.task().job_id()
                                                   : call->progress.task().job_id())
                << ": " << status.error_message() << " (gRPC code "
                << static_cast<int>(status.error_code()) << "); dropped\n";
      continue;
    }
    restore(*call);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      const std::string unknown_id =
          call->kind == Call::Kind::kLog ? call->log.worker_id() : call->progress.worker_id();
      mu_.Unlock();
      on_unknown_worker_(unknown_id);
      mu_.Lock();
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(backoff.next().value()));
  }
  mu_.Unlock();
}

}  // namespace mixtrain::worker
