// Why: `mixtrain-worker` (DESIGN.md §3): parses the flags, starts the agent
// and stops it cleanly on SIGINT/SIGTERM. Started with the hidden first
// argument __task it is instead the task process of one rank
// (task_child.h). Returns from main, never exit().
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "engine/backend/memory_tracker.h"
#include "engine/common/byte_size.h"
#include "engine/common/machine_memory.h"
#include "net/token_file.h"
#include "worker/agent.h"
#include "worker/resources.h"
#include "worker/task_child.h"

namespace {

// Written by the signal handler, read by the thread that stops the agent.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal) {
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t written = ::write(g_stop_pipe[1], &byte, 1);
}

// OMP_NUM_THREADS when it holds a positive number, else 0: the coordinator
// sizes the threads to this worker's share of its host.
int threads_from_environment() {
  if (const char* text = std::getenv("OMP_NUM_THREADS"); text != nullptr) {
    return std::max(0, std::atoi(text));
  }
  return 0;
}

int run_agent(int argc, char** argv) {
  CLI::App app{"mixtrain-worker: runs training tasks the coordinator schedules here"};
  mixtrain::worker::AgentOptions options;
  std::string token_file;
  std::string backend_choice = "auto";
  double peak_tflops = 0.0;
  app.add_option("--coordinator", options.connection.address, "Coordinator HOST:PORT")->required();
  app.add_option("--join-token-file", token_file, "File holding the workers' join token");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "HOST:PORT to serve /metrics on (port 0: a free one)")
      ->capture_default_str();
  app.add_option("--advertise-host", options.advertise_host,
                 "Host Prometheus reaches /metrics at (default: the data address)");
  app.add_option("--data-address", options.data_address,
                 "Address this worker's ranks bind and peers connect to (default: this host's "
                 "address on its route to the coordinator)");
  app.add_option("--data-iface", options.data_iface,
                 "Network interface whose address the ranks use (instead of --data-address)")
      ->excludes("--data-address");
  int threads = 0;
  app.add_option("--threads", threads,
                 "CPU threads per rank (default: OMP_NUM_THREADS when set, else this worker's "
                 "share of its host: the host's cores over the workers on it, at most what its "
                 "CPU affinity and cgroup quota allow)")
      ->envname("MIXTRAIN_WORKER_THREADS")
      ->check(CLI::PositiveNumber);
  app.add_option("--backend", backend_choice,
                 "auto | cpu | cuda | cuda:N (the GPU this worker's ranks train on)")
      ->capture_default_str();
  app.add_option("--tls-ca", options.connection.channel.tls_ca_file,
                 "PEM CA of the coordinator's certificate (default: plaintext)");
  app.add_option("--tls-server-name", options.connection.channel.tls_server_name,
                 "Name the coordinator's certificate must carry");
  std::string memory_limit;
  app.add_option("--memory-limit", memory_limit,
                 "Memory this worker's ranks may use, e.g. 16GiB (default: the machine's less "
                 "a tenth, at least 512 MiB, for the system)");
  app.add_option("--peak-tflops", peak_tflops,
                 "Peak TFLOP/s of this worker's device, for MFU (default: a CPU estimate)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!token_file.empty()) {
    options.connection.join_token = mixtrain::net::read_token_file(token_file);
    if (options.connection.join_token.empty()) {
      std::cerr << "mixtrain-worker: cannot read --join-token-file " << token_file
                << " (missing, unreadable or empty)\n";
      return 2;
    }
  }
  const absl::StatusOr<std::string> backend = mixtrain::worker::resolve_backend(backend_choice);
  if (!backend.ok()) {
    std::cerr << "mixtrain-worker: " << backend.status().message() << "\n";
    return 2;
  }
  options.backend = *backend;
  options.peak_flops = peak_tflops * 1e12;
  options.threads = threads > 0 ? threads : threads_from_environment();
  if (!memory_limit.empty()) {
    const std::optional<int64_t> limit = mixtrain::parse_byte_size(memory_limit);
    const int64_t machine = mixtrain::machine_memory_bytes();
    if (!limit || *limit == 0) {
      std::cerr << "mixtrain-worker: --memory-limit '" << memory_limit
                << "' is not a memory size (e.g. 16GiB, 512MiB)\n";
      return 2;
    }
    if (machine > 0 && *limit > machine) {
      std::cerr << "mixtrain-worker: --memory-limit " << memory_limit << " is more than this "
                << "machine's memory (" << mixtrain::gib_text(static_cast<double>(machine))
                << ")\n";
      return 2;
    }
    options.memory_limit = *limit;
  }

  // SIGINT/SIGTERM, whichever thread they land on, wake the thread that
  // stops the agent (a handler may do no more than write to a pipe).
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0) {
    std::cerr << "mixtrain-worker: cannot create a pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<mixtrain::worker::Agent>> agent =
      mixtrain::worker::Agent::create(options, std::cerr);
  if (!agent.ok()) {
    std::cerr << "mixtrain-worker: " << agent.status().message() << "\n";
    return 2;
  }
  mixtrain::worker::Agent* self = agent->get();
  std::thread signals([self] {
    unsigned char signal = 0;
    ssize_t n = 0;
    while ((n = ::read(g_stop_pipe[0], &signal, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) return;  // the agent stopped by itself
    std::cerr << "mixtrain-worker: " << strsignal(signal) << ", stopping\n";
    self->stop();
  });
  const absl::Status ran = self->run();  // returns only after stop()
  ::close(g_stop_pipe[1]);                // ends the signal thread when no signal came
  signals.join();
  return ran.ok() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == mixtrain::worker::kTaskModeArg)
    return mixtrain::worker::run_task_child(std::cin);
  return run_agent(argc, argv);
}
