// Why: `mixtrain local` (DESIGN.md §2, §3) runs the real service on one
// machine: a `mixtrain-coordinator` and N `mixtrain-worker` processes on
// loopback, sharing a private state directory (database, random tokens in
// 0600 files, checkpoints, one log file per process). This class starts
// them, notices when one dies, and stops every one of them, always.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "launch/child_process.h"

namespace mixtrain::cli {

struct LocalClusterOptions {
  int workers = 1;
  std::filesystem::path data_root;          // the coordinator's --data-root (the spec's directory)
  std::filesystem::path state_dir;          // empty: a fresh temporary directory
  std::string http_listen = "127.0.0.1:0";  // the coordinator's --http
};

class LocalCluster {
 public:
  // Starts the coordinator (binaries next to this executable, else on
  // PATH), waits until it serves, then starts the workers. Returns nullptr
  // after printing why to `err` (naming the log file) and stopping
  // whatever it had started.
  static std::unique_ptr<LocalCluster> start(const LocalClusterOptions& options, std::ostream& err);
  ~LocalCluster() { stop(); }
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  int http_port() const { return http_port_; }             // 0 when the coordinator did not say
  const std::string& token() const { return token_; }      // the clients' bearer token
  const std::filesystem::path& state_dir() const { return state_dir_; }
  std::filesystem::path checkpoint_root() const { return state_dir_ / "checkpoints"; }

  // Empty while every process runs; else which one ended and how, with its
  // log file. Thread safe.
  std::string exited_process();

  // SIGTERM to every process still running, SIGKILL to those left after
  // 5 s, all reaped. Idempotent and thread safe (a signal thread may call it).
  void stop();

 private:
  struct Child {
    std::string name;  // "coordinator", "worker 1"
    pid_t pid = -1;
    std::filesystem::path log;
    bool reaped = false;
  };

  explicit LocalCluster(std::filesystem::path state_dir) : state_dir_(std::move(state_dir)) {}

  // Starts one process logging to state_dir/<log_name>; false after
  // printing why to `err`.
  bool spawn(const std::string& name, const std::string& binary,
             const std::vector<std::string>& args, const std::vector<std::string>& env,
             const std::string& log_name, std::ostream& err);
  // Polls the coordinator's log for its "serving on port P" line.
  bool wait_for_coordinator(std::ostream& err);

  const std::filesystem::path state_dir_;
  std::string address_;
  int http_port_ = 0;
  std::string token_;
  std::mutex mu_;
  std::vector<Child> children_;  // GUARDED_BY(mu_) once start() returned
};

}  // namespace mixtrain::cli
