// Why: training runs in a process of its own (the agent's binary started
// in its hidden task mode), so that a crash, abort or out-of-memory kill
// of one rank never takes the agent down. This is that process's main.
#pragma once

#include <istream>

namespace mixtrain::worker {

// The argument that starts `mixtrain-worker` in task mode.
inline constexpr char kTaskModeArg[] = "__task";

// Reads a TaskLaunch (task_launch.h) from `in`, runs the task's rank and
// reports steps, evaluations and the summary as child_messages.h lines on
// kReportFd; progress lines go to stdout, errors to stderr. Working
// directory: Task.data_root when set. Returns 0 when training succeeded,
// 2 for a bad launch, spec or data (kInvalidArgument), 1 when training
// failed or could not start otherwise. Never throws.
int run_task_child(std::istream& in);

}  // namespace mixtrain::worker
