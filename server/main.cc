// Why: entry point of `mixtrain-coordinator` (DESIGN.md §3). Reads the
// options, starts the server and serves until SIGINT or SIGTERM. Exit
// codes: 0 after a clean stop, 2 bad usage (flags, token files, options
// the server refuses), 1 the server could not start.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <absl/strings/numbers.h>
#include "net/error_status.h"
#include "net/token_file.h"
#include "server/coordinator_server.h"
#include "server/listen_security.h"

namespace {

int g_stop_pipe = -1;

// Async-signal-safe: one byte into the pipe the stopper thread reads.
void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t written = write(g_stop_pipe, &byte, 1);
}

// Reads `path` into `text`; false when it cannot be read.
bool read_file(const std::string& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  text = bytes.str();
  return in.good() || in.eof();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixtrain-coordinator: accepts training jobs and schedules them onto workers"};
  mixtrain::server::CoordinatorOptions options;
  options.db_path = "mixtrain.db";
  std::string token_file, join_token_file, tls_cert, tls_key;
  double worker_timeout_seconds = 10;
  bool insecure = false;
  auto* listen = app.add_option("--listen", options.listen,
                                "gRPC address, HOST:PORT (port 0: pick one); default "
                                "0.0.0.0:50051 with both token files, else 127.0.0.1:50051");
  app.add_flag("--insecure", insecure,
               "serve on a non-loopback --listen address even though a token file is missing: "
               "anyone who reaches it may then call the service(s) without a token");
  auto* http = app.add_option("--http", options.http_listen,
                              "HTTP address for /metrics and /sd/workers, HOST:PORT (port 0: "
                              "pick one); default 0.0.0.0:9400 with both token files, else "
                              "127.0.0.1:9400");
  app.add_option("--db", options.db_path, "SQLite database file (created if missing)")
      ->capture_default_str();
  app.add_option("--auth-token-file", token_file, "file holding the clients' bearer token")
      ->check(CLI::ExistingFile);
  app.add_option("--join-token-file", join_token_file, "file holding the workers' join token")
      ->check(CLI::ExistingFile);
  auto* cert = app.add_option("--tls-cert", tls_cert, "PEM server certificate (chain)")
                   ->check(CLI::ExistingFile);
  auto* key = app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert")
                  ->check(CLI::ExistingFile);
  cert->needs(key);
  key->needs(cert);
  app.add_option("--data-root", options.data_root,
                 "directory that relative data paths of job specs resolve in (default: the "
                 "working directory)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--checkpoint-root", options.checkpoint_root,
                 "directory under which each job checkpoints, in <root>/<job id>")
      ->capture_default_str();
  app.add_option("--worker-timeout-seconds", worker_timeout_seconds,
                 "a worker silent this long is lost and its rank's attempt fails")
      ->check(
          [](const std::string& value) -> std::string {
            double seconds = 0;
            return absl::SimpleAtod(value, &seconds) && seconds > 0 && seconds <= 86400
                       ? ""
                       : "expected seconds, more than 0 and at most 86400, got '" + value + "'";
          },
          "SECONDS")
      ->capture_default_str();
  double stall_timeout_seconds = 120;
  app.add_option("--stall-timeout-seconds", stall_timeout_seconds,
                 "a running job whose rank 0 reports no new step for this long (and for 20 "
                 "times its recent step time) fails with \"no progress\" and may restart")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  double first_step_timeout_seconds = 1800;
  app.add_option("--first-step-timeout-seconds", first_step_timeout_seconds,
                 "a running job whose rank 0 reports no step this long after the attempt "
                 "started (loading, rendezvous, resuming) fails with \"no progress\" and may "
                 "restart")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  double preempt_grace_seconds = 120;
  app.add_option("--preempt-grace-seconds", preempt_grace_seconds,
                 "a job preempted for a higher-priority one that has not checkpointed and "
                 "stopped after this long is stopped anyway (and resumes from its last "
                 "checkpoint)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  double lost_worker_retention_seconds = 300;
  app.add_option("--lost-worker-retention-seconds", lost_worker_retention_seconds,
                 "a lost worker stays listed (in `mixtrain workers` and "
                 "mixtrain_workers{state=\"lost\"}) this long after its timeout, then is "
                 "forgotten; it registers anew under a new id")
      ->check(CLI::Range(0.0, 86400.0 * 30))
      ->capture_default_str();
  app.add_option("--retain-finished-days", options.retention.finished_days,
                 "finished jobs (and their logs and events) are deleted this many days after "
                 "they finished; 0 keeps them however old")
      ->check(CLI::Range(int64_t{0}, int64_t{365'000}))
      ->capture_default_str();
  app.add_option("--retain-finished-jobs", options.retention.finished_jobs,
                 "at most this many finished jobs are kept, the newest; 0: no limit")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000'000}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.worker_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(worker_timeout_seconds * 1000));
  options.stall_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(stall_timeout_seconds * 1000));
  options.preempt_grace =
      std::chrono::milliseconds(static_cast<int64_t>(preempt_grace_seconds * 1000));
  options.first_step_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(first_step_timeout_seconds * 1000));
  options.lost_worker_retention =
      std::chrono::milliseconds(static_cast<int64_t>(lost_worker_retention_seconds * 1000));
  for (auto [file, token] : {std::pair{&token_file, &options.auth_token},
                             std::pair{&join_token_file, &options.join_token}}) {
    if (file->empty()) continue;
    *token = mixtrain::net::read_token_file(*file);
    if (token->empty()) {
      std::cerr << "mixtrain-coordinator: " << *file << " holds no token\n";
      return 2;
    }
  }
  if (!options.auth_token.empty() && options.auth_token == options.join_token) {
    std::cerr << "mixtrain-coordinator: --auth-token-file and --join-token-file hold the same "
                 "token; clients and workers must have different ones\n";
    return 2;
  }
  if (listen->count() == 0) {
    options.listen = mixtrain::server::default_listen(!options.auth_token.empty(),
                                                      !options.join_token.empty());
  }
  if (http->count() == 0) {
    options.http_listen = mixtrain::server::default_http_listen(!options.auth_token.empty(),
                                                                !options.join_token.empty());
  }
  const absl::StatusOr<std::string> warning = mixtrain::server::check_listen_security(
      options.listen, options.http_listen, !options.auth_token.empty(), !options.join_token.empty(),
      insecure);
  if (!warning.ok()) {
    std::cerr << "mixtrain-coordinator: " << warning.status().message() << "\n";
    return 2;
  }
  if (!warning->empty()) std::cerr << "mixtrain-coordinator: " << *warning << "\n";
  if (!tls_cert.empty() &&
      (!read_file(tls_cert, options.tls_cert_pem) || !read_file(tls_key, options.tls_key_pem))) {
    std::cerr << "mixtrain-coordinator: cannot read " << tls_cert << " or " << tls_key << "\n";
    return 2;
  }

  // gRPC may start threads before main(), so blocking signals cannot route
  // them to one thread; the handler only wakes the stopper thread instead.
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    std::cerr << "mixtrain-coordinator: cannot create a pipe\n";
    return 1;
  }
  g_stop_pipe = pipe_fds[1];
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  auto server = mixtrain::server::CoordinatorServer::start(options);
  if (!server.ok()) {
    std::cerr << "mixtrain-coordinator: " << server.status().message() << "\n";
    return mixtrain::net::exit_code(server.status());
  }
  std::cerr << "mixtrain-coordinator: serving on port " << (*server)->port() << ", http on port "
            << (*server)->http_port() << ", "
            << (options.tls_cert_pem.empty() ? "plaintext" : "TLS") << ", jobs in "
            << options.db_path << std::endl;
  std::thread stopper([&] {
    char byte;
    while (read(pipe_fds[0], &byte, 1) < 0 && errno == EINTR) {
    }
    (*server)->shutdown();
  });
  (*server)->wait();
  stopper.join();
  return 0;
}
