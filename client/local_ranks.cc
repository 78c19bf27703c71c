// Why: implementation of the local rank launcher (see local_ranks.h).
#include "local_ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "comm/tcp_store.h"
#include "common/error.h"

extern char** environ;

namespace mixtrain::cli {
namespace {

constexpr const char* kRankVar = "MIXTRAIN_RANK";
constexpr const char* kWorldVar = "MIXTRAIN_WORLD_SIZE";
constexpr const char* kStoreVar = "MIXTRAIN_STORE";  // host:port
constexpr const char* kTimeoutVar = "MIXTRAIN_COMM_TIMEOUT_SECONDS";

int parse_int(const char* name, std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  MIXTRAIN_CHECK_ARG(error == std::errc() && end == text.data() + text.size(),
                     std::string(name) + "=" + std::string(text) + " is not an integer");
  return value;
}

// How a child ended.
struct Ended {
  pid_t pid = -1;  // -1: none ended before the deadline
  int exit_code = 0;
  int signal = 0;  // nonzero when a signal ended it (exit_code is then 1)
};

Ended wait_any(std::chrono::steady_clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (WIFEXITED(status)) return {pid, WEXITSTATUS(status), 0};
      return {pid, 1, WIFSIGNALED(status) ? WTERMSIG(status) : 0};
    }
    if (pid < 0 || std::chrono::steady_clock::now() >= deadline) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::chrono::milliseconds collective_timeout() {
  const char* text = std::getenv(kTimeoutVar);
  if (text == nullptr) return std::chrono::seconds(300);
  const int seconds = parse_int(kTimeoutVar, text);
  MIXTRAIN_CHECK_ARG(seconds > 0, std::string(kTimeoutVar) + " must be positive, got " + text);
  return std::chrono::seconds(seconds);
}

std::optional<RankEnvironment> rank_environment() {
  const char* rank = std::getenv(kRankVar);
  if (rank == nullptr) return std::nullopt;
  const char* world = std::getenv(kWorldVar);
  const char* store = std::getenv(kStoreVar);
  MIXTRAIN_CHECK_ARG(
      world != nullptr && store != nullptr,
      std::string(kRankVar) + " is set but " + kWorldVar + " or " + kStoreVar + " is not");
  RankEnvironment out;
  out.rank = parse_int(kRankVar, rank);
  out.world_size = parse_int(kWorldVar, world);
  const std::string_view address(store);
  const size_t colon = address.rfind(':');
  MIXTRAIN_CHECK_ARG(colon != std::string_view::npos,
                     std::string(kStoreVar) + "=" + store + " is not host:port");
  out.store_host = std::string(address.substr(0, colon));
  out.store_port = parse_int(kStoreVar, address.substr(colon + 1));
  MIXTRAIN_CHECK_ARG(out.world_size >= 1 && out.rank >= 0 && out.rank < out.world_size,
                     std::string(kRankVar) + "=" + rank + " is outside " + kWorldVar + "=" + world);
  out.timeout = collective_timeout();
  return out;
}

int run_local_ranks(const std::vector<std::string>& argv, int world_size, std::ostream& err) {
  const std::chrono::milliseconds timeout = collective_timeout();
  TcpStoreServer store("127.0.0.1", 0);
  std::vector<std::string> args = argv;
  args[0] = "/proc/self/exe";
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);

  std::vector<pid_t> pids;
  int exit_code = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> env = {
        std::string(kRankVar) + "=" + std::to_string(rank),
        std::string(kWorldVar) + "=" + std::to_string(world_size),
        std::string(kStoreVar) + "=127.0.0.1:" + std::to_string(store.port())};
    // The ranks share this machine's cores instead of each taking them all.
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      env.push_back("OMP_NUM_THREADS=" +
                    std::to_string(std::max(1u, cores / static_cast<unsigned>(world_size))));
    }
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      if (!entry.starts_with(kRankVar) && !entry.starts_with(kWorldVar) &&
          !entry.starts_with(kStoreVar))
        env.emplace_back(entry);
    }
    std::vector<char*> env_pointers;
    for (std::string& e : env) env_pointers.push_back(e.data());
    env_pointers.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (rank > 0) posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, arg_pointers.data(),
                               env_pointers.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      err << "mixtrain train: cannot start rank " << rank << ": " << std::strerror(rc) << "\n";
      exit_code = 1;
      break;
    }
    pids.push_back(pid);
  }

  // Wait for every rank; after the first failure the others get the
  // collective timeout (and a margin) to notice and report it themselves.
  std::vector<pid_t> running = pids;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (!running.empty()) {
    const Ended ended = wait_any(deadline);
    if (ended.pid < 0) {
      err << "mixtrain train: ending " << running.size()
          << " rank(s) still running after a rank failed\n";
      for (pid_t p : running) kill(p, SIGKILL);
      while (wait_any(std::chrono::steady_clock::now() + std::chrono::seconds(10)).pid > 0) {
      }
      break;
    }
    std::erase(running, ended.pid);
    const auto rank = std::find(pids.begin(), pids.end(), ended.pid) - pids.begin();
    if (ended.signal != 0) {
      err << "mixtrain train: rank " << rank << " (pid " << ended.pid << ") was killed by signal "
          << ended.signal << " (" << strsignal(ended.signal) << ")\n";
    }
    if (ended.exit_code != 0 && exit_code == 0) {
      exit_code = ended.exit_code;
      deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(10);
    }
  }
  if (exit_code == 0 && pids.size() < static_cast<size_t>(world_size)) exit_code = 1;
  return exit_code;
}

}  // namespace mixtrain::cli
