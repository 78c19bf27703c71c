// Why: see local_cluster.h.
#include "client/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace mixtrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

// `name` next to this executable, else the first executable `name` on
// PATH; empty when neither exists.
std::string find_binary(const std::string& name) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path sibling = self.parent_path() / name;
    if (access(sibling.c_str(), X_OK) == 0) return sibling.string();
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// 32 random bytes as hex.
std::string random_token() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[32] = {};
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

// Writes `secret` to `path` readable by this user only; false after
// printing why to `err`.
bool write_secret(const std::filesystem::path& path, const std::string& secret, std::ostream& err) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool ok = fd >= 0 && fchmod(fd, 0600) == 0 &&
                  write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  const int error = errno;
  if (fd >= 0) close(fd);
  if (!ok)
    err << "mixtrain local: cannot write " << path.string() << ": " << strerror(error) << "\n";
  return ok;
}

// A fresh directory for this run, or `requested` (created if missing);
// empty path after printing why to `err`.
std::filesystem::path make_state_dir(const std::filesystem::path& requested, std::ostream& err) {
  std::error_code error;
  if (!requested.empty()) {
    std::filesystem::create_directories(requested / "checkpoints", error);
    if (!error) return std::filesystem::absolute(requested);
    err << "mixtrain local: cannot create " << requested.string() << ": " << error.message()
        << "\n";
    return {};
  }
  std::string pattern = (std::filesystem::temp_directory_path(error) / "mixtrain-local-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    err << "mixtrain local: cannot create a temporary directory " << pattern << ": "
        << strerror(errno) << "\n";
    return {};
  }
  std::filesystem::create_directory(std::filesystem::path(pattern) / "checkpoints", error);
  return pattern;
}

std::string describe(const std::string& name, const launch::EndedChild& ended,
                     const std::filesystem::path& log) {
  std::string how = ended.signal != 0 ? "was killed by signal " + std::to_string(ended.signal)
                                      : "exited with code " + std::to_string(ended.exit_code);
  return "the local " + name + " " + how + " (log: " + log.string() + ")";
}

}  // namespace

std::unique_ptr<LocalCluster> LocalCluster::start(const LocalClusterOptions& options,
                                                  std::ostream& err) {
  const std::string coordinator = find_binary("mixtrain-coordinator");
  const std::string worker = find_binary("mixtrain-worker");
  for (const auto& [name, path] :
       {std::pair{"mixtrain-coordinator", coordinator}, std::pair{"mixtrain-worker", worker}}) {
    if (path.empty()) {
      err << "mixtrain local: cannot find " << name << " next to this executable or on PATH\n";
      return nullptr;
    }
  }
  const std::filesystem::path state_dir = make_state_dir(options.state_dir, err);
  if (state_dir.empty()) return nullptr;
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(state_dir));
  cluster->token_ = random_token();
  const std::filesystem::path auth_file = state_dir / "auth-token";
  const std::filesystem::path join_file = state_dir / "join-token";
  if (!write_secret(auth_file, cluster->token_, err) ||
      !write_secret(join_file, random_token(), err)) {
    return nullptr;
  }
  const std::vector<std::string> env = launch::child_environment({}, {});
  if (!cluster->spawn("coordinator", coordinator,
                      {"--listen", "127.0.0.1:0", "--http", options.http_listen, "--db",
                       (state_dir / "mixtrain.db").string(), "--auth-token-file",
                       auth_file.string(), "--join-token-file", join_file.string(), "--data-root",
                       std::filesystem::absolute(options.data_root).string(), "--checkpoint-root",
                       cluster->checkpoint_root().string()},
                      env, "coordinator.log", err) ||
      !cluster->wait_for_coordinator(err)) {
    return nullptr;
  }
  const std::vector<std::string> worker_env =
      launch::child_environment(launch::shared_cores_environment(options.workers), {});
  for (int i = 1; i <= options.workers; ++i) {
    if (!cluster->spawn("worker " + std::to_string(i), worker,
                        {"--coordinator", cluster->address_, "--join-token-file",
                         join_file.string(), "--metrics-listen", "127.0.0.1:0"},
                        worker_env, "worker-" + std::to_string(i) + ".log", err)) {
      return nullptr;
    }
  }
  return cluster;
}

bool LocalCluster::spawn(const std::string& name, const std::string& binary,
                         const std::vector<std::string>& args, const std::vector<std::string>& env,
                         const std::string& log_name, std::ostream& err) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child{name, -1, state_dir_ / log_name};
  std::string error;
  child.pid =
      launch::spawn_child(binary, argv, env, {child.log.string(), child.log.string()}, error);
  if (child.pid < 0) {
    err << "mixtrain local: cannot start the " << name << " (" << binary << "): " << error << "\n";
    return false;
  }
  std::lock_guard lock(mu_);
  children_.push_back(child);
  return true;
}

bool LocalCluster::wait_for_coordinator(std::ostream& err) {
  static const std::regex kServing(R"(serving on port (\d+))");
  static const std::regex kHttp(R"(http on port (\d+))");
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  const Child& coordinator = children_.front();
  while (Clock::now() < deadline) {
    std::ifstream file(coordinator.log);
    std::stringstream text;
    text << file.rdbuf();
    const std::string log = text.str();
    std::smatch match;
    if (std::regex_search(log, match, kServing)) {
      address_ = "127.0.0.1:" + match[1].str();
      if (std::regex_search(log, match, kHttp)) http_port_ = std::stoi(match[1].str());
      return true;
    }
    const std::string ended = exited_process();
    if (!ended.empty()) {
      err << "mixtrain local: " << ended << " before serving:\n" << log;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  err << "mixtrain local: the coordinator did not start serving within 30 s (log: "
      << coordinator.log.string() << ")\n";
  return false;
}

std::string LocalCluster::exited_process() {
  std::lock_guard lock(mu_);
  for (Child& child : children_) {
    if (child.reaped) continue;
    const launch::EndedChild ended = launch::wait_child(child.pid, Clock::now());
    if (ended.pid < 0) continue;
    child.reaped = true;
    return describe(child.name, ended, child.log);
  }
  return "";
}

void LocalCluster::stop() {
  std::lock_guard lock(mu_);
  for (const Child& child : children_) {
    if (!child.reaped) kill(child.pid, SIGTERM);
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  for (Child& child : children_) {
    if (child.reaped) continue;
    if (launch::wait_child(child.pid, deadline).pid < 0) {
      kill(child.pid, SIGKILL);
      launch::wait_child(child.pid, Clock::time_point::max());
    }
    child.reaped = true;
  }
}

}  // namespace mixtrain::cli
