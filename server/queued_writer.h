// Why: three server streams (a worker's Tasks, WatchJob, StreamLogs) are
// written from other threads whenever something happens, while gRPC allows
// one write in flight and no Finish during a write. This reactor queues the
// messages, writes them one at a time and finishes only once idle; a
// cancelled call (client gone, server shutting down) finishes at once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace mixtrain::server {

template <typename T>
class QueuedWriter : public grpc::ServerWriteReactor<T> {
 public:
  // Queues `message` behind the earlier ones; ignored once finishing.
  void push(T message) {
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      queue_.push_back(std::move(message));
      if (writing_) return;
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
    }
    this->StartWrite(&current_);
  }

  // Finishes the call with `status` once the queued messages are written.
  // Only the first call counts.
  void finish(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      finishing_ = true;
      status_ = status;
      if (writing_) return;
    }
    this->Finish(std::move(status));
  }

 protected:
  // Called once the call is over, before the reactor deletes itself:
  // whoever pushes to it must forget it here.
  virtual void on_done() = 0;

 private:
  void OnWriteDone(bool ok) override {
    bool finish_now = false;
    bool write_next = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        if (!finishing_) status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke");
        finishing_ = true;
        queue_.clear();
      }
      if (queue_.empty()) {
        writing_ = false;
        finish_now = finishing_;
        status = status_;
      } else {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        write_next = true;
      }
    }
    if (finish_now) {
      this->Finish(std::move(status));
    } else if (write_next) {
      this->StartWrite(&current_);
    }
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      queue_.clear();
    }
    finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    on_done();
    delete this;
  }

  absl::Mutex mu_;
  std::deque<T> queue_ ABSL_GUARDED_BY(mu_);
  T current_;  // the message being written; only touched by the writer in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);  // set when finishing_ becomes true
};

// A stream refused before anything was written (a bad token, an unknown
// worker): it finishes with `status` at once.
template <typename T>
class RefusedWriter final : public QueuedWriter<T> {
 public:
  explicit RefusedWriter(grpc::Status status) { this->finish(std::move(status)); }

 private:
  void on_done() override {}
};

}  // namespace mixtrain::server
