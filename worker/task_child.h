// Why: training runs in a process of its own (the agent's binary started
// in its hidden task mode), so that a crash, abort or out-of-memory kill
// of one rank never takes the agent down. This is that process's main.
#pragma once

#include <signal.h>

#include <istream>

namespace mixtrain::worker {

// The argument that starts `mixtrain-worker` in task mode.
inline constexpr char kTaskModeArg[] = "__task";

// The signal that asks a task process to checkpoint at the next step
// boundary and stop (preemption). It starts blocked, so one sent early is
// held until the process can act on it.
inline constexpr int kPreemptSignal = SIGUSR1;
// The exit code of a task process that stopped so.
inline constexpr int kPreemptedExitCode = 3;

// Reads a TaskLaunch (task_launch.h) from `in`, runs the task's rank and
// reports steps, evaluations and the summary as child_messages.h lines on
// kReportFd; progress lines go to stdout, errors to stderr. Working
// directory: Task.data_root when set. Returns 0 when training succeeded,
// kPreemptedExitCode when it stopped on kPreemptSignal, 2 for a bad
// launch, spec or data (kInvalidArgument), 1 when training failed or
// could not start otherwise. Never throws.
int run_task_child(std::istream& in);

}  // namespace mixtrain::worker
