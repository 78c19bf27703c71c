// Why: see task_outbox.h.
#include "task_outbox.h"

#include <algorithm>

#include "queued_writer.h"

namespace mixtrain::server {

class TaskStream final : public QueuedWriter<v1::TaskCommand> {
 public:
  TaskStream(TaskOutbox* outbox, std::string worker_id)
      : outbox_(outbox), worker_id_(std::move(worker_id)) {}

 private:
  void on_written(const v1::TaskCommand& command, bool ok) override {
    if (ok) outbox_->delivered(worker_id_, command);
  }
  void on_done() override { outbox_->forget(worker_id_, this); }

  TaskOutbox* const outbox_;
  const std::string worker_id_;
};

void TaskOutbox::send(const std::string& worker_id, v1::TaskCommand command) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_[worker_id];
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

void TaskOutbox::delivered(const std::string& worker_id, const v1::TaskCommand& command) {
  absl::MutexLock lock(&mu_);
  const auto box = boxes_.find(worker_id);
  if (box == boxes_.end()) return;
  const std::string written = command.SerializeAsString();
  auto& pending = box->second.pending;
  const auto it = std::find_if(pending.begin(), pending.end(), [&](const v1::TaskCommand& p) {
    return p.SerializeAsString() == written;
  });
  if (it != pending.end()) pending.erase(it);
}

void TaskOutbox::forget(const std::string& worker_id, TaskStream* stream) {
  absl::MutexLock lock(&mu_);
  const auto box = boxes_.find(worker_id);
  if (box != boxes_.end() && box->second.stream == stream) box->second.stream = nullptr;
}

}  // namespace mixtrain::server
