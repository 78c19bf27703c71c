// Why: see task_outbox.h.
#include "server/task_outbox.h"

#include <algorithm>

#include "server/queued_writer.h"
#include "proto/running_task.h"

namespace mixtrain::server {
namespace {

bool same_attempt(const v1::TaskCommand& command, const std::string& job_id, int32_t attempt) {
  if (command.has_start()) {
    return command.start().job_id() == job_id && command.start().attempt() == attempt;
  }
  return command.cancel().job_id() == job_id && command.cancel().attempt() == attempt;
}

bool starts(const v1::TaskCommand& command, const v1::RunningTask& task) {
  return command.has_start() && v1::same_task(v1::running_of(command.start()), task);
}

}  // namespace

class TaskStream final : public QueuedWriter<v1::TaskCommand> {
 public:
  TaskStream(TaskOutbox* outbox, std::string worker_id)
      : outbox_(outbox), worker_id_(std::move(worker_id)) {}

 private:
  void on_done() override { outbox_->forget(worker_id_, this); }

  TaskOutbox* const outbox_;
  const std::string worker_id_;
};

void TaskOutbox::send(const std::string& worker_id, v1::TaskCommand command) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_[worker_id];
  if (command.has_cancel()) {
    std::erase_if(box.pending, [&](const v1::TaskCommand& waiting) {
      return waiting.has_start() &&
             same_attempt(waiting, command.cancel().job_id(), command.cancel().attempt());
    });
  }
  box.pending.push_back(command);
  if (box.stream != nullptr) box.stream->push(std::move(command));
}

grpc::ServerWriteReactor<v1::TaskCommand>* TaskOutbox::open(const std::string& worker_id) {
  auto* stream = new TaskStream(this, worker_id);
  absl::MutexLock lock(&mu_);
  if (closed_) {
    stream->finish({grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"});
    return stream;
  }
  Box& box = boxes_[worker_id];
  if (box.stream != nullptr) box.stream->finish(grpc::Status::OK);
  box.stream = stream;
  for (const v1::TaskCommand& command : box.pending) stream->push(command);
  return stream;
}

void TaskOutbox::acknowledge(const std::string& worker_id,
                             const std::vector<v1::RunningTask>& listed) {
  absl::MutexLock lock(&mu_);
  const auto box = boxes_.find(worker_id);
  if (box == boxes_.end()) return;
  std::erase_if(box->second.pending, [&](const v1::TaskCommand& command) {
    if (command.has_start()) {
      return std::any_of(listed.begin(), listed.end(),
                         [&](const v1::RunningTask& task) { return starts(command, task); });
    }
    return std::none_of(listed.begin(), listed.end(), [&](const v1::RunningTask& task) {
      return same_attempt(command, task.job_id(), task.attempt());
    });
  });
}

void TaskOutbox::acknowledge_report(const std::string& worker_id, const v1::RunningTask& task,
                                    bool ended) {
  absl::MutexLock lock(&mu_);
  const auto box = boxes_.find(worker_id);
  if (box == boxes_.end()) return;
  std::erase_if(box->second.pending, [&](const v1::TaskCommand& command) {
    return starts(command, task) ||
           (ended && command.has_cancel() && same_attempt(command, task.job_id(), task.attempt()));
  });
}

void TaskOutbox::clear(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  if (auto box = boxes_.find(worker_id); box != boxes_.end()) box->second.pending.clear();
}

void TaskOutbox::close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (auto& [id, box] : boxes_) {
    if (box.stream != nullptr) {
      box.stream->finish({grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"});
    }
  }
}

void TaskOutbox::forget(const std::string& worker_id, TaskStream* stream) {
  absl::MutexLock lock(&mu_);
  const auto box = boxes_.find(worker_id);
  if (box != boxes_.end() && box->second.stream == stream) box->second.stream = nullptr;
}

}  // namespace mixtrain::server
