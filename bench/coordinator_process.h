// Why: the coordinator benchmarks measure the real `mixtrain-coordinator`
// binary, not an in-process stand-in: this starts one on free ports with
// tokens and a database of the caller's, waits until it serves, reads its
// resource use from /proc, and stops it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace mixtrain::bench {

inline constexpr char kClientToken[] = "bench-client-token";
inline constexpr char kJoinToken[] = "bench-join-token";

class CoordinatorProcess {
 public:
  // Starts BIN_DIR/mixtrain-coordinator in `work` (tokens, log and, unless
  // `db` is given, the database there) with `extra_args`; ok() is false
  // (and error() says why) when it did not serve within 10 s.
  CoordinatorProcess(const std::filesystem::path& bin_dir, const std::filesystem::path& work,
                     const std::filesystem::path& db, std::vector<std::string> extra_args = {});
  // SIGTERM, then waits for it.
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  bool ok() const { return port_ != 0; }
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int http_port() const { return http_port_; }

  // Its peak resident set (VmHWM) in bytes; 0 when unreadable.
  long long peak_rss_bytes() const;
  // Its user + system CPU time so far, in seconds.
  double cpu_seconds() const;

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  int http_port_ = 0;
  std::string error_;
};

// The `p` quantile of `values` (0 when empty).
double percentile(std::vector<double> values, double p);

}  // namespace mixtrain::bench
