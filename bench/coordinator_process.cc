// Why: see coordinator_process.h.
#include "bench/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace mixtrain::bench {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after `marker` in `text`, 0 when absent.
int number_after(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + marker.size());
}

}  // namespace

CoordinatorProcess::CoordinatorProcess(const fs::path& bin_dir, const fs::path& work,
                                       const fs::path& db, std::vector<std::string> extra_args) {
  fs::create_directories(work);
  std::ofstream(work / "token") << kClientToken;
  std::ofstream(work / "join-token") << kJoinToken;
  const std::string binary = (bin_dir / "mixtrain-coordinator").string();
  const fs::path log = work / "coordinator.log";
  std::vector<std::string> args = {binary,
                                   "--listen=127.0.0.1:0",
                                   "--http=127.0.0.1:0",
                                   "--db=" + (db.empty() ? work / "jobs.db" : db).string(),
                                   "--auth-token-file=" + (work / "token").string(),
                                   "--join-token-file=" + (work / "join-token").string(),
                                   "--data-root=" + work.string(),
                                   "--checkpoint-root=" + (work / "checkpoints").string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> c_args;
  for (std::string& arg : args) c_args.push_back(arg.data());
  c_args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT, 0644);
  const int spawned = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, c_args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    pid_ = 0;
    error_ = "cannot start " + binary;
    return;
  }
  for (int i = 0; i < 200 && port_ == 0; ++i) {
    const std::string text = read_file(log);
    port_ = number_after(text, "serving on port ");
    http_port_ = number_after(text, "http on port ");
    if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (port_ == 0) error_ = "the coordinator did not start:\n" + read_file(log);
}

CoordinatorProcess::~CoordinatorProcess() {
  if (pid_ == 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
}

long long CoordinatorProcess::peak_rss_bytes() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

double CoordinatorProcess::cpu_seconds() const {
  std::string stat = read_file("/proc/" + std::to_string(pid_) + "/stat");
  // Fields after the command name (which may hold spaces) end with ')'.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

}  // namespace mixtrain::bench
