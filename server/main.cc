// Why: entry point of `mixtrain-coordinator` (DESIGN.md §3). Reads the
// options, starts the server and serves until SIGINT or SIGTERM. Exit
// codes: 0 after a clean stop, 2 bad usage, 1 the server could not start.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "coordinator_server.h"

namespace {

// The token in `path`, surrounding whitespace removed; empty when unreadable.
std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const size_t begin = token.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return token.substr(begin, token.find_last_not_of(" \t\r\n") - begin + 1);
}

int g_stop_pipe = -1;

// Async-signal-safe: one byte into the pipe the stopper thread reads.
void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t written = write(g_stop_pipe, &byte, 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixtrain-coordinator: accepts training jobs and schedules them onto workers"};
  mixtrain::server::CoordinatorOptions options;
  options.db_path = "mixtrain.db";
  std::string token_file;
  app.add_option("--listen", options.listen, "gRPC address, HOST:PORT");
  app.add_option("--db", options.db_path, "SQLite database file (created if missing)");
  app.add_option("--auth-token-file", token_file, "file holding the clients' bearer token")
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!token_file.empty()) {
    options.auth_token = read_token_file(token_file);
    if (options.auth_token.empty()) {
      std::cerr << "mixtrain-coordinator: " << token_file << " holds no token\n";
      return 2;
    }
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
    return 1;
  }
  std::cerr << "mixtrain-coordinator: serving on port " << (*server)->port() << ", jobs in "
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
