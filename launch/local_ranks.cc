// Why: implementation of the local rank launcher (see local_ranks.h).
#include "launch/local_ranks.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "launch/child_process.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/error.h"
#include "engine/common/host_port.h"

namespace mixtrain::launch {
namespace {

constexpr const char* kRankVar = "MIXTRAIN_RANK";
constexpr const char* kWorldVar = "MIXTRAIN_WORLD_SIZE";
constexpr const char* kLocalRankVar = "MIXTRAIN_LOCAL_RANK";
constexpr const char* kStoreVar = "MIXTRAIN_STORE";  // host:port
constexpr const char* kTimeoutVar = "MIXTRAIN_COMM_TIMEOUT_SECONDS";

int parse_int(const char* name, std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  MIXTRAIN_CHECK_ARG(error == std::errc() && end == text.data() + text.size(),
                     std::string(name) + "=" + std::string(text) + " is not an integer");
  return value;
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
  std::optional<HostPort> address = parse_host_port(store);
  MIXTRAIN_CHECK_ARG(address.has_value(),
                     std::string(kStoreVar) + "=" + store + " is not host:port");
  out.store_host = std::move(address->host);
  out.store_port = address->port;
  MIXTRAIN_CHECK_ARG(out.world_size >= 1 && out.rank >= 0 && out.rank < out.world_size,
                     std::string(kRankVar) + "=" + rank + " is outside " + kWorldVar + "=" + world);
  const char* local_rank = std::getenv(kLocalRankVar);
  out.local_rank = local_rank != nullptr ? parse_int(kLocalRankVar, local_rank) : out.rank;
  MIXTRAIN_CHECK_ARG(out.local_rank >= 0 && out.local_rank <= out.rank,
                     std::string(kLocalRankVar) + "=" + std::to_string(out.local_rank) +
                         " is outside 0.." + kRankVar + "=" + rank);
  out.timeout = collective_timeout();
  return out;
}

int run_local_ranks(const std::vector<std::string>& argv, int world_size, std::ostream& err) {
  const std::chrono::milliseconds timeout = collective_timeout();
  TcpStoreServer store("127.0.0.1", 0);
  std::vector<std::string> args = argv;
  args[0] = "/proc/self/exe";

  std::vector<pid_t> pids;
  int exit_code = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> first = {
        std::string(kRankVar) + "=" + std::to_string(rank),
        std::string(kLocalRankVar) + "=" + std::to_string(rank),
        std::string(kWorldVar) + "=" + std::to_string(world_size),
        std::string(kStoreVar) + "=127.0.0.1:" + std::to_string(store.port())};
    // The ranks share this machine's cores instead of each taking them all.
    for (std::string& entry : shared_cores_environment(world_size)) first.push_back(entry);
    ChildSetup output;
    if (rank > 0) output.stdout_path = "/dev/null";
    std::string error;
    const pid_t pid =
        spawn_child("/proc/self/exe", args,
                    child_environment(first, {kRankVar, kLocalRankVar, kWorldVar, kStoreVar}), output, error);
    if (pid < 0) {
      err << "mixtrain train: cannot start rank " << rank << ": " << error << "\n";
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
    const EndedChild ended = wait_child(-1, deadline);
    if (ended.pid < 0) {
      err << "mixtrain train: ending " << running.size()
          << " rank(s) still running after a rank failed\n";
      for (pid_t p : running) kill(p, SIGKILL);
      while (wait_child(-1, std::chrono::steady_clock::now() + std::chrono::seconds(10)).pid > 0) {
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

}  // namespace mixtrain::launch
