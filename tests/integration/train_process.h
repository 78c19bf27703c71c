// Why: the multi-process tests run the real `mixtrain train` one way: N
// ranks over loopback with the collective timeout bounded, each run in a
// directory of its own holding its checkpoints, summary and output, and a
// failed run failing the test with what it printed.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mixtrain {

// Runs `mixtrain train SPEC --nproc RANKS ARGS` with its checkpoints in
// dir/ckpt, its summary JSON in dir/summary.json and its output in
// dir/log.txt; returns whether it exited 0 (a failure is also a test
// failure, with the log).
inline bool run_train(const std::filesystem::path& spec, int ranks, const std::string& args,
                      const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::string command = std::string("MIXTRAIN_COMM_TIMEOUT_SECONDS=60 ") + MIXTRAIN_BINARY +
                              " train " + spec.string() + " --nproc " + std::to_string(ranks) +
                              " " + args + " --set checkpoint.dir=" + (dir / "ckpt").string() +
                              " --summary-json " + (dir / "summary.json").string() + " >" +
                              (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log(dir / "log.txt");
  EXPECT_EQ(status, 0) << dir.filename().string() << ":\n"
                       << std::string(std::istreambuf_iterator<char>(log), {});
  return status == 0;
}

}  // namespace mixtrain
