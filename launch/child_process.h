// Why: `mixtrain train --nproc` starts its ranks, `mixtrain local` its
// coordinator and workers, and the worker agent each task process the same
// way: posix_spawn with an explicit environment and the child's streams
// and pipes where the caller says, then waiting for children with a
// deadline. One implementation serves all three.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mixtrain::launch {

// How a child starts beyond its program, arguments and environment.
struct ChildSetup {
  // Where its output goes, opened write-only (appending, created 0600 if
  // missing); an empty path keeps this process's stream.
  std::string stdout_path;
  std::string stderr_path;
  // Descriptors of this process it gets, as (ours, its): pipe ends on the
  // numbers it expects. Applied after the paths.
  std::vector<std::pair<int, int>> descriptors;
  // Its own process group (so one signal to the group reaches all it
  // starts), default handling of SIGPIPE, SIGINT and SIGTERM and no signal
  // blocked, whatever this process ignores or the calling thread blocks:
  // a child its caller supervises and stops.
  bool own_process_group = false;
  // Signals it starts with blocked (with own_process_group): one sent
  // before it installed its handler stays pending until it unblocks them,
  // instead of acting by default.
  std::vector<int> blocked_signals;
};

// This process's environment without the entries whose name starts with
// one of `drop_prefixes`, after the `first` entries ("NAME=value").
std::vector<std::string> child_environment(const std::vector<std::string>& first,
                                           const std::vector<std::string_view>& drop_prefixes);

// "OMP_NUM_THREADS=k" giving each of `processes` children an equal share
// of the cores this process may use (usable_cores.h), or an empty list
// when OMP_NUM_THREADS is set
// (the user's choice then reaches the children unchanged).
std::vector<std::string> shared_cores_environment(int processes);

// Starts `path` with `argv` (argv[0] included) and `env`. Returns the pid,
// or -1 with `error` set to why (strerror text).
pid_t spawn_child(const std::string& path, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const ChildSetup& setup, std::string& error);

// How a child ended.
struct EndedChild {
  pid_t pid = -1;  // -1: none ended before the deadline (or there is no such child)
  int exit_code = 0;
  int signal = 0;  // nonzero when a signal ended it (exit_code is then 1)
};

// Reaps child `pid` (-1: any child) once it ends, polling until `deadline`.
EndedChild wait_child(pid_t pid, std::chrono::steady_clock::time_point deadline);

}  // namespace mixtrain::launch
