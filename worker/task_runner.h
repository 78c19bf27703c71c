// Why: one rank of a job runs in a child process (this binary in task
// mode, task_child.h) so that a crash, abort, non-zero exit or out-of-
// memory kill of training is reported with its cause instead of taking
// the agent down. The runner owns that process: it hands over the task on
// stdin, reads the child's report pipe (child_messages.h) and its
// stdout/stderr lines, cancels it (SIGTERM to its process group, SIGKILL
// 3 s later) and reports how it ended, exactly once.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "proto/mixtrain.pb.h"
#include "worker/child_messages.h"
#include "worker/task_launch.h"

namespace mixtrain::worker {

// How a task ended.
struct TaskResult {
  v1::TaskOutcome outcome = v1::TASK_OUTCOME_FAILED;
  std::string message;       // the cause of a failure or cancellation; empty on success
  std::optional<TrainSummary> summary;  // the child's summary when it wrote one
};

// What the runner tells its owner, on the runner's own thread.
struct TaskEvents {
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalProgress&)> on_eval;
  std::function<void(const EvalBatchProgress&)> on_eval_batch;
  std::function<void(const std::string&)> on_output;   // one stdout or stderr line of the child
  std::function<void(const TaskResult&)> on_finished;  // last call, exactly once
};

// "rank R exited with code N: <last stderr line>" or "rank R killed by
// signal 9 (SIGKILL)" for a waitpid status of a process that failed.
std::string describe_exit(int rank, int wait_status, std::string_view last_error_line);

class TaskRunner {
 public:
  // How long a cancelled child has between SIGTERM and SIGKILL.
  static constexpr std::chrono::seconds kKillGrace{3};

  // Starts `executable` (normally /proc/self/exe) in task mode for
  // `launch` on a thread of its own and returns at once; a child that
  // cannot be started is reported through on_finished as FAILED.
  TaskRunner(std::string executable, TaskLaunch launch, TaskEvents events);
  // Cancels the task if it still runs and waits for on_finished.
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Asks the child to stop (SIGTERM to its process group, SIGKILL after
  // kKillGrace); the outcome becomes CANCELLED with `reason` unless it had
  // already ended. Safe from any thread, any number of times.
  void cancel(const std::string& reason);
  // Asks the child to checkpoint at the next step boundary and stop
  // (kPreemptSignal); the outcome becomes PREEMPTED when it does. Safe
  // from any thread, any number of times.
  void preempt();

  // True once the task process ended and on_finished returned.
  bool finished() const { return finished_.load(); }
  // True once the task process ended, on_finished may still be running
  // (handing the outcome over): destroying the runner then waits only
  // for that, never for a task.
  bool exited() const { return exited_.load(); }

  const v1::Task& task() const { return launch_.task; }

 private:
  void run();
  // Starts the child, relays its reports until it ends and says how it ended.
  TaskResult execute();
  // Sends `signal` to the child's process group when it runs.
  void signal_child(int signal) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string executable_;
  const TaskLaunch launch_;
  const TaskEvents events_;
  absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;  // the child, once started, until reaped
  bool cancel_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool preempt_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point kill_at_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> exited_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace mixtrain::worker
