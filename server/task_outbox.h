// Why: the coordinator hands each worker its task starts and cancels over
// one long-lived Tasks stream, which breaks and reopens (network trouble, a
// restarted agent). Commands wait here per worker until written to its
// current stream: a command written successfully is never sent again, one
// not yet written goes out on the next stream the worker opens.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "mixtrain.pb.h"

namespace mixtrain::server {

class TaskStream;

// Thread safe.
class TaskOutbox {
 public:
  // Queues `command` for `worker_id`, written at once when it has a stream.
  void send(const std::string& worker_id, v1::TaskCommand command);

  // A new Tasks stream of `worker_id`: an older one of that worker ends (OK)
  // and every command not yet written is written here, in order.
  grpc::ServerWriteReactor<v1::TaskCommand>* open(const std::string& worker_id);

  // Forgets the commands not yet written to `worker_id` (a lost worker).
  void clear(const std::string& worker_id);

  // Ends every stream (UNAVAILABLE) and refuses new ones. Idempotent.
  void close();

 private:
  friend class TaskStream;
  struct Box {
    std::deque<v1::TaskCommand> pending;  // oldest first, including the one being written
    TaskStream* stream = nullptr;
  };
  // `command` was written on `stream`: it is no longer pending.
  void delivered(const std::string& worker_id, const v1::TaskCommand& command);
  void forget(const std::string& worker_id, TaskStream* stream);

  absl::Mutex mu_;
  std::map<std::string, Box> boxes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace mixtrain::server
