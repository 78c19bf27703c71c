// Why: see child_process.h.
#include "launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/common/usable_cores.h"

extern char** environ;

namespace mixtrain::launch {

std::vector<std::string> child_environment(const std::vector<std::string>& first,
                                           const std::vector<std::string_view>& drop_prefixes) {
  std::vector<std::string> env = first;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool keep = true;
    for (std::string_view prefix : drop_prefixes) keep = keep && !entry.starts_with(prefix);
    if (keep) env.emplace_back(entry);
  }
  return env;
}

std::vector<std::string> shared_cores_environment(int processes) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return {};
  return {"OMP_NUM_THREADS=" + std::to_string(std::max(1, usable_cores() / std::max(1, processes)))};
}

pid_t spawn_child(const std::string& path, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const ChildSetup& setup,
                  std::string& error) {
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  std::vector<std::string> environment = env;
  std::vector<char*> env_pointers;
  for (std::string& entry : environment) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  constexpr int kFlags = O_WRONLY | O_CREAT | O_APPEND;
  if (!setup.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, setup.stdout_path.c_str(), kFlags, 0600);
  }
  if (!setup.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, setup.stderr_path.c_str(), kFlags, 0600);
  }
  for (const auto& [ours, its] : setup.descriptors) {
    posix_spawn_file_actions_adddup2(&actions, ours, its);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (setup.own_process_group) {
    posix_spawnattr_setflags(
        &attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t blocked;
    sigemptyset(&blocked);
    for (int s : setup.blocked_signals) sigaddset(&blocked, s);
    posix_spawnattr_setsigmask(&attributes, &blocked);
    sigset_t defaults;  // ignored ones would stay ignored across exec
    sigemptyset(&defaults);
    for (int s : {SIGPIPE, SIGINT, SIGTERM}) sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, &attributes, arg_pointers.data(),
                             env_pointers.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = std::strerror(rc);
    return -1;
  }
  return pid;
}

EndedChild wait_child(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t ended = waitpid(pid, &status, WNOHANG);
    if (ended > 0) {
      if (WIFEXITED(status)) return {ended, WEXITSTATUS(status), 0};
      return {ended, 1, WIFSIGNALED(status) ? WTERMSIG(status) : 0};
    }
    if (ended < 0 || std::chrono::steady_clock::now() >= deadline) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace mixtrain::launch
