// Why: two server streams (a worker's Tasks, WatchJob) are
// written from other threads whenever something happens, while gRPC allows
// one write in flight and no Finish during a write. This reactor queues the
// messages, writes them one at a time and finishes only once idle; a
// cancelled call (client gone, server shutting down) finishes at once.
// A client that never reads must not grow the coordinator without bound
// (300 silent WatchJob streams once took it from 196 MB to 850 MB), so the
// queue is bounded: either a new message supersedes the queued ones (only
// the latest job state matters) or the stream ends with RESOURCE_EXHAUSTED.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <string>
#include <utility>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include "server/error_text.h"

namespace mixtrain::server {

// How many messages may wait behind the one being written, and what a
// push does when that many already wait.
struct QueueBound {
  size_t max_queued = 1024;
  // true: the new message replaces the waiting ones; false: the stream
  // ends with RESOURCE_EXHAUSTED (the client reconnects and starts over).
  bool keep_latest = false;
};

template <typename T>
class QueuedWriter : public grpc::ServerWriteReactor<T> {
 public:
  explicit QueuedWriter(QueueBound bound = {}) : bound_(bound) {}

  // Queues `message` behind the earlier ones; ignored once finishing.
  void push(T message) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      if (queue_.size() >= bound_.max_queued) {
        queue_.clear();
        if (!bound_.keep_latest) {
          end_locked({grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "the client read too slowly: more than " +
                          std::to_string(bound_.max_queued) + " messages waited"});
          return;
        }
      }
      queue_.push_back(std::move(message));
      if (writing_) return;
      next = next_locked();
    }
    act(next);
  }

  // Finishes the call with `status` (its message bounded: error_text.h)
  // once the queued messages are written. Only the first call counts.
  void finish(grpc::Status status) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      finishing_ = true;
      status_ = std::move(status);
      if (writing_) return;
      next = next_locked();
    }
    act(next);
  }

 protected:
  // Called once the call is over, before the reactor deletes itself:
  // whoever pushes to it must forget it here.
  virtual void on_done() = 0;

 private:
  enum class Next { kIdle, kWrite, kFinish };

  // With no write in flight: takes the next message into current_, or
  // says the call can finish, or that there is nothing to do.
  Next next_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      return Next::kWrite;
    }
    if (finishing_ && !finished_) {
      finished_ = true;
      return Next::kFinish;
    }
    return Next::kIdle;
  }

  void act(Next next) {
    if (next == Next::kWrite) this->StartWrite(&current_);
    if (next == Next::kFinish) {
      grpc::Status status;
      {
        absl::MutexLock lock(&mu_);
        status = status_;
      }
      this->Finish(bounded_status(status));
    }
  }

  // Ends the call with `status` without writing anything more.
  void end_locked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.clear();
    if (!finishing_) status_ = std::move(status);
    finishing_ = true;
  }

  void OnWriteDone(bool ok) override {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) end_locked({grpc::StatusCode::CANCELLED, "the stream broke"});
      next = next_locked();
    }
    act(next);
  }

  void OnCancel() override {
    Next next = Next::kIdle;
    {
      absl::MutexLock lock(&mu_);
      end_locked(grpc::Status::CANCELLED);
      if (!writing_) next = next_locked();
    }
    act(next);
  }

  void OnDone() override {
    on_done();
    delete this;
  }

  const QueueBound bound_;
  absl::Mutex mu_;
  std::deque<T> queue_ ABSL_GUARDED_BY(mu_);
  T current_;  // the message being written; only touched by the writer in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // finish asked for (or the call broke)
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish called
  grpc::Status status_ ABSL_GUARDED_BY(mu_);     // set when finishing_ becomes true
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
