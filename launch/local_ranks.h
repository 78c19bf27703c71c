// Why: `mixtrain train --nproc N` runs N data-parallel ranks on this machine
// without a coordinator. The launcher hosts the rendezvous store and starts
// N copies of the same command line, each told its rank through the
// environment; a rank finds it there and joins the group. When a rank
// fails the launcher lets the others fail on their own (each names the
// dead peer within the collective timeout) and then ends any straggler.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mixtrain::launch {

// What a rank process learns from its launcher.
struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  // Its place among the ranks of its own machine (MIXTRAIN_LOCAL_RANK, as
  // torchrun's LOCAL_RANK), which picks its GPU: ranks started by hand on
  // several machines set it, --nproc sets it to the rank. Unset: the rank.
  int local_rank = 0;
  std::string store_host;
  int store_port = 0;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // every collective's deadline
};

// The rank environment when this process was started by a launcher, else
// nullopt. Throws EngineError(kInvalidArgument) naming a malformed variable.
std::optional<RankEnvironment> rank_environment();

// The collective timeout: MIXTRAIN_COMM_TIMEOUT_SECONDS when set, else 300 s.
// Throws EngineError(kInvalidArgument) when it is not a positive number.
std::chrono::milliseconds collective_timeout();

// Starts `world_size` ranks running `argv` (argv[0] is replaced by this
// executable) with a store on 127.0.0.1, waits for all of them and returns
// 0 when all succeeded, else the first failing rank's exit code (1 for a
// rank killed by a signal). Rank 0 shares this process's stdout and
// stderr; the others only stderr. Unless OMP_NUM_THREADS is set, each rank
// gets cores / world_size OpenMP threads.
int run_local_ranks(const std::vector<std::string>& argv, int world_size, std::ostream& err);

}  // namespace mixtrain::launch
