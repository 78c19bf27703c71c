// Why: the coordinator and the agent both name a rank of an attempt by its
// RunningTask and ask whether two name the same; one definition beside the
// proto keeps them agreeing.
#pragma once

#include "proto/mixtrain.pb.h"

namespace mixtrain::v1 {

inline bool same_task(const RunningTask& a, const RunningTask& b) {
  return a.job_id() == b.job_id() && a.attempt() == b.attempt() && a.rank() == b.rank();
}

// The rank of the attempt that `task` starts.
inline RunningTask running_of(const Task& task) {
  RunningTask running;
  running.set_job_id(task.job_id());
  running.set_attempt(task.attempt());
  running.set_rank(task.rank());
  return running;
}

}  // namespace mixtrain::v1
