// Why: see task_runner.h.
#include "worker/task_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "launch/child_process.h"
#include "worker/frame_pipe.h"
#include "worker/line_splitter.h"
#include "worker/task_child.h"

namespace mixtrain::worker {
namespace {

// Both ends of a pipe, close-on-exec, numbered 10 and up so that none of
// them already sits on the 0-3 the child's ends are moved to.
struct Pipe {
  int read = -1;
  int write = -1;
};

std::optional<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  Pipe out;
  out.read = ::fcntl(fds[0], F_DUPFD_CLOEXEC, 10);
  out.write = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  ::close(fds[0]);
  ::close(fds[1]);
  if (out.read < 0 || out.write < 0) {
    if (out.read >= 0) ::close(out.read);
    if (out.write >= 0) ::close(out.write);
    return std::nullopt;
  }
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Writes all of `text` to `fd`; false when the reader went away.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads what `fd` has now into `splitter`; false at end of file or error
// (the caller closes it), true when it would block.
bool drain(int fd, ChunkSplitter& splitter) {
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      splitter.add(std::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    splitter.finish();
    return false;
  }
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "unknown signal";
}

// The rank's process is gone, and with it the attempt (any next one has a
// higher epoch): what the attempt was building can never be committed.
// Every rank's agent does this once its own child is gone, so whichever
// rank ends last leaves no temporary behind, whichever host it ran on.
// Never throws: the agent outlives any trouble with the directory.
void remove_attempt_temporaries(const v1::Task& task) {
  if (task.checkpoint_dir().empty()) return;
  try {
    remove_stale_checkpoint_temporaries(task.checkpoint_dir(), task.attempt() + 1);
  } catch (const std::exception& e) {
    std::cerr << "mixtrain-worker: job " << task.job_id() << " attempt " << task.attempt()
              << ": its unfinished checkpoint stays: " << e.what() << std::endl;
  }
}

}  // namespace

std::string describe_exit(int rank, int wait_status, std::string_view last_error_line) {
  std::string out = "rank " + std::to_string(rank);
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    out += " killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
    if (signal == SIGKILL) out += ", possibly out of memory";
  } else {
    out += " exited with code " + std::to_string(WEXITSTATUS(wait_status));
  }
  if (!last_error_line.empty()) out += ": " + std::string(last_error_line);
  return out;
}

TaskRunner::TaskRunner(std::string executable, TaskLaunch launch, TaskEvents events)
    : executable_(std::move(executable)), launch_(std::move(launch)), events_(std::move(events)) {
  // A child that dies before reading its stdin must not kill the agent.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { ::signal(SIGPIPE, SIG_IGN); });
  thread_ = std::thread([this] { run(); });
}

TaskRunner::~TaskRunner() {
  cancel("the worker agent is stopping");
  thread_.join();
}

void TaskRunner::cancel(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (cancel_requested_) return;
    cancel_requested_ = true;
    cancel_reason_ = reason;
    kill_at_ = std::chrono::steady_clock::now() + kKillGrace;
  }
  signal_child(SIGTERM);
}

void TaskRunner::preempt() {
  absl::MutexLock lock(&mu_);
  preempt_requested_ = true;
  if (pid_ > 0) ::kill(pid_, kPreemptSignal);
}

void TaskRunner::signal_child(int signal) {
  absl::MutexLock lock(&mu_);
  if (pid_ > 0) ::kill(-pid_, signal);
}

void TaskRunner::run() {
  const TaskResult result = execute();
  if (result.outcome == v1::TASK_OUTCOME_FAILED || result.outcome == v1::TASK_OUTCOME_CANCELLED)
    remove_attempt_temporaries(launch_.task);
  exited_ = true;
  events_.on_finished(result);
  finished_ = true;  // after on_finished, so the outcome is in its owner's hands
}

TaskResult TaskRunner::execute() {
  const int rank = launch_.task.rank();
  TaskResult result;
  const std::string who = "rank " + std::to_string(rank);
  std::vector<Pipe> pipes;
  for (int i = 0; i < 4; ++i) {
    std::optional<Pipe> pipe = make_pipe();
    if (!pipe) break;
    pipes.push_back(*pipe);
  }
  if (pipes.size() < 4) {
    result.message = who + ": cannot create the task's pipes: " + std::strerror(errno);
    for (Pipe& pipe : pipes) {
      close_fd(pipe.read);
      close_fd(pipe.write);
    }
    return result;
  }
  // The task process gets its pipes' ends on the descriptors it expects,
  // in its own process group with default signal handling (the agent
  // ignores SIGPIPE, which exec would keep).
  launch::ChildSetup setup{.descriptors = {{pipes[0].read, 0},
                                           {pipes[1].write, 1},
                                           {pipes[2].write, 2},
                                           {pipes[3].write, kReportFd}},
                           .own_process_group = true,
                           .blocked_signals = {kPreemptSignal}};
  std::string spawn_error;
  const pid_t pid = launch::spawn_child(executable_, {executable_, std::string(kTaskModeArg)},
                                        launch::child_environment({}, {}), setup, spawn_error);
  // The child's ends belong to the child now.
  close_fd(pipes[0].read);
  for (size_t i = 1; i < pipes.size(); ++i) close_fd(pipes[i].write);
  if (pid < 0) {
    close_fd(pipes[0].write);
    for (size_t i = 1; i < pipes.size(); ++i) close_fd(pipes[i].read);
    result.message = who + ": cannot start the task process " + executable_ + ": " + spawn_error;
    return result;
  }
  bool cancelled_early = false;
  {
    absl::MutexLock lock(&mu_);
    pid_ = pid;
    cancelled_early = cancel_requested_;
    if (preempt_requested_) ::kill(pid_, kPreemptSignal);
  }
  if (cancelled_early) signal_child(SIGTERM);

  write_all(pipes[0].write, encode_task_launch(launch_));
  close_fd(pipes[0].write);

  std::string last_error_line;
  LineSplitter out_lines([&](std::string line) { events_.on_output(line); });
  LineSplitter err_lines([&](std::string line) {
    if (!line.empty()) last_error_line = line;
    events_.on_output(line);
  });
  FrameSplitter reports([&](std::string_view frame) {
    const std::optional<ChildMessage> message = decode_child_message(frame);
    if (!message) return;
    switch (message->kind) {
      case ChildMessage::Kind::kStep:
        events_.on_step(message->step);
        break;
      case ChildMessage::Kind::kEval:
        events_.on_eval(message->eval);
        break;
      case ChildMessage::Kind::kEvalBatch:
        events_.on_eval_batch(message->eval_batch);
        break;
      case ChildMessage::Kind::kSummary:
        result.summary = message->summary;
        break;
    }
  });
  std::array<int, 3> fds = {pipes[1].read, pipes[2].read, pipes[3].read};
  std::array<ChunkSplitter*, 3> splitters = {&out_lines, &err_lines, &reports};
  for (int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  int status = 0;
  bool cancelled = false;
  bool preempted = false;  // asked to stop at a step boundary
  std::string reason;
  while (true) {
    std::array<pollfd, 3> polled{};
    for (size_t i = 0; i < fds.size(); ++i) polled[i] = {fds[i], POLLIN, 0};  // -1 is skipped
    ::poll(polled.data(), polled.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] >= 0 && polled[i].revents != 0 && !drain(fds[i], *splitters[i])) close_fd(fds[i]);
    }
    bool reaped = false;
    bool escalate = false;
    {
      absl::MutexLock lock(&mu_);
      reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (reaped) pid_ = -1;
      cancelled = cancel_requested_;
      preempted = preempt_requested_;
      reason = cancel_reason_;
      escalate = !reaped && cancel_requested_ && std::chrono::steady_clock::now() >= kill_at_;
    }
    if (escalate) signal_child(SIGKILL);
    if (reaped) break;
  }
  // What the child wrote just before it ended.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] >= 0) {
      drain(fds[i], *splitters[i]);
      splitters[i]->finish();
      close_fd(fds[i]);
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    result.outcome = v1::TASK_OUTCOME_SUCCEEDED;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kPreemptedExitCode && !cancelled &&
             (preempted || (result.summary && result.summary->status == "preempted"))) {
    // Asked, or stopped with the other ranks at the step they agreed on
    // because another rank was asked first: the ranks of a job stop
    // together, and the request to this one may still be on its way.
    result.outcome = v1::TASK_OUTCOME_PREEMPTED;
    result.message = who + " stopped after checkpointing step " +
                     std::to_string(result.summary ? result.summary->steps : 0) + " (preempted)";
  } else if (cancelled) {
    result.outcome = v1::TASK_OUTCOME_CANCELLED;
    result.message = who + " cancelled: " + reason;
  } else {
    result.outcome = v1::TASK_OUTCOME_FAILED;
    result.message = describe_exit(rank, status, last_error_line);
  }
  return result;
}

}  // namespace mixtrain::worker
