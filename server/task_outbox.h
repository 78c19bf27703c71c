// Why: the coordinator hands each worker its task starts and cancels over
// one long-lived Tasks stream, which breaks and reopens (network trouble, a
// partition, a restarted agent). A write that "succeeded" only reached a
// socket buffer: on a half-dead stream (measured during a partition) the
// start never arrived and the attempt waited for the whole collective
// timeout. So a command stays here until the worker shows it took effect,
// and every new stream of the worker gets every command still waiting: a
// start until the worker lists that task (heartbeat, registration or
// report), a cancel until it no longer lists any task of that attempt.
// The agent ignores a start of the task it already runs and a cancel of
// one it does not run, so a command seen twice is harmless.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include "proto/mixtrain.pb.h"

namespace mixtrain::server {

class TaskStream;

// Thread safe.
class TaskOutbox {
 public:
  // Queues `command` for `worker_id`, written at once when it has a stream.
  // A cancel withdraws the start of the same attempt still waiting.
  void send(const std::string& worker_id, v1::TaskCommand command);

  // A new Tasks stream of `worker_id`: an older one of that worker ends (OK)
  // and every command still waiting is written here, in order.
  grpc::ServerWriteReactor<v1::TaskCommand>* open(const std::string& worker_id);

  // `worker_id` runs exactly `listed` (a heartbeat or registration): the
  // starts of those tasks and the cancels of attempts it no longer runs
  // took effect.
  void acknowledge(const std::string& worker_id, const std::vector<v1::RunningTask>& listed);
  // `worker_id` reported on `task`: its start took effect, and when `ended`
  // so did a cancel of its attempt.
  void acknowledge_report(const std::string& worker_id, const v1::RunningTask& task, bool ended);

  // Forgets the commands waiting for `worker_id` (a lost worker).
  void clear(const std::string& worker_id);

  // Ends every stream (UNAVAILABLE) and refuses new ones. Idempotent.
  void close();

 private:
  friend class TaskStream;
  struct Box {
    std::deque<v1::TaskCommand> pending;  // oldest first, written or not
    TaskStream* stream = nullptr;
  };
  void forget(const std::string& worker_id, TaskStream* stream);

  absl::Mutex mu_;
  std::map<std::string, Box> boxes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace mixtrain::server
