// Why: the multi-process comm tests run every rank as a real process, so
// collectives cross real loopback sockets and a rank can really die. The
// ranks run a rank program (a gtest binary such as comm_rank_checks; each
// scenario is one of its tests, picked with --gtest_filter; its side of the
// meeting is rank_environment.h) connected to a TcpStoreServer that this
// launcher owns. A rank's assertions fail its own exit code; the test here
// checks every exit and prints the ranks' logs when something went wrong.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/tcp_store.h"
#include "test_support/temp_dir.h"

extern char** environ;

namespace mixtrain::comm_test {

struct RankOutcome {
  bool finished = false;  // reaped
  int exit_code = -1;     // when it exited
  int signal = 0;         // when a signal ended it
};

class RankGroup {
 public:
  // Starts `world` ranks running the tests of rank program `program` that
  // match `filter`. Every rank's collectives time out after `timeout`.
  RankGroup(std::string program, const std::string& filter, int world,
            std::chrono::milliseconds timeout)
      : outcomes_(world) {
    for (int rank = 0; rank < world; ++rank) {
      std::vector<std::string> env = {
          "MIXTRAIN_TEST_STORE_PORT=" + std::to_string(server_.port()),
          "MIXTRAIN_TEST_RANK=" + std::to_string(rank),
          "MIXTRAIN_TEST_WORLD=" + std::to_string(world),
          "MIXTRAIN_TEST_TIMEOUT_MS=" + std::to_string(timeout.count())};
      for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
      std::vector<char*> envp;
      for (std::string& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      std::string filter_arg = "--gtest_filter=" + filter;
      char* argv[] = {program.data(), filter_arg.data(), nullptr};
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      const std::string log = log_path(rank);
      posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      pid_t pid = -1;
      const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, envp.data());
      posix_spawn_file_actions_destroy(&actions);
      EXPECT_EQ(rc, 0) << "cannot start " << program;
      pids_.push_back(rc == 0 ? pid : -1);
      if (rc != 0) outcomes_[rank].finished = true;
    }
  }

  // Kills and reaps every rank still running.
  ~RankGroup() {
    for (size_t rank = 0; rank < pids_.size(); ++rank) {
      if (!outcomes_[rank].finished) kill(pids_[rank], SIGKILL);
    }
    wait({}, std::chrono::seconds(10));
  }

  // Waits until every rank in `ranks` (all when empty) has ended, at most
  // `timeout`; true when they all did.
  bool wait(std::vector<int> ranks, std::chrono::milliseconds timeout) {
    if (ranks.empty()) {
      for (int rank = 0; rank < static_cast<int>(pids_.size()); ++rank) ranks.push_back(rank);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool all = true;
      for (int rank : ranks) {
        RankOutcome& outcome = outcomes_[rank];
        int status = 0;
        if (!outcome.finished && waitpid(pids_[rank], &status, WNOHANG) == pids_[rank]) {
          outcome.finished = true;
          if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
          if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
        }
        all = all && outcome.finished;
      }
      if (all) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const RankOutcome& outcome(int rank) const { return outcomes_[rank]; }

  // Every rank's output, for failure messages.
  std::string logs() const {
    std::ostringstream all;
    for (size_t rank = 0; rank < pids_.size(); ++rank) {
      std::ifstream in(log_path(static_cast<int>(rank)));
      all << "---- rank " << rank << " ----\n" << in.rdbuf() << "\n";
    }
    return all.str();
  }

  // Waits up to `timeout` for all ranks and expects each to have passed.
  void expect_all_passed(std::chrono::milliseconds timeout) {
    ASSERT_TRUE(wait({}, timeout)) << "ranks still running after the timeout\n" << logs();
    std::string failed;
    for (size_t rank = 0; rank < pids_.size(); ++rank) {
      if (outcomes_[rank].exit_code != 0) failed.append(" ").append(std::to_string(rank));
    }
    EXPECT_EQ(failed, "") << "ranks that failed:" << failed << "\n" << logs();
  }

 private:
  std::string log_path(int rank) const { return dir_.path("rank" + std::to_string(rank) + ".log"); }

  TcpStoreServer server_;
  test_support::TempDir dir_;
  std::vector<pid_t> pids_;
  std::vector<RankOutcome> outcomes_;
};

}  // namespace mixtrain::comm_test
