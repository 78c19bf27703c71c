// Why: the Gloo communicator's bandwidth on this machine, in nccl-tests'
// terms, so that CPU data-parallel runs can be judged against what the
// wire allows. For N local ranks over loopback (each rank a process, as in
// training) it times all_reduce, reduce_scatter and all_gather on buffers
// of 1 KiB to 64 MiB and prints, per size: the time per op (the slowest
// rank's mean), algbw = size / time and busbw = algbw x 2(N-1)/N
// (all_reduce) or (N-1)/N (reduce_scatter, all_gather), where size is the
// full buffer (the all_reduce buffer, the reduce_scatter input, the
// all_gather output). With N = 1 nothing moves: the time is the op's
// fixed cost (queueing to the communicator's thread and back).
//
//   comm_bench [--ranks 1,2,4] [--max-bytes 67108864] [--dtype fp32|bf16|fp16]
//   (each rank is this program started again with --rank R --world N --port P)
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/gloo/gloo_communicator.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

struct Options {
  std::vector<int> ranks = {1, 2, 4};
  int64_t max_bytes = int64_t{64} << 20;
  std::string dtype = "fp32";
  // Set in a rank process.
  int rank = -1, world = 0, port = 0;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--ranks") {
      options.ranks.clear();
      std::istringstream list(value);
      for (std::string item; std::getline(list, item, ',');)
        options.ranks.push_back(std::stoi(item));
    } else if (flag == "--max-bytes") {
      options.max_bytes = std::atoll(value);
    } else if (flag == "--dtype") {
      options.dtype = value;
    } else if (flag == "--rank") {
      options.rank = std::atoi(value);
    } else if (flag == "--world") {
      options.world = std::atoi(value);
    } else if (flag == "--port") {
      options.port = std::atoi(value);
    } else {
      std::fprintf(stderr, "comm_bench: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return options;
}

// Repetitions for a buffer of `bytes`: enough to time small buffers, few
// for the large ones whose single op already takes long.
int iterations(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{32} << 20) / bytes, 3, 200));
}

int run_rank(const Options& options) {
  TcpStoreClient store("127.0.0.1", options.port);
  CommOptions comm_options;
  comm_options.timeout = std::chrono::seconds(120);
  GlooCommunicator comm(store, options.rank, options.world, comm_options);
  const auto backend = make_backend("cpu");
  const DType dtype = parse_dtype(options.dtype);
  const int world = options.world;
  Tensor slowest = backend->empty({1}, DType::kF32, MemoryCategory::kWorkspace);
  if (options.rank == 0) {
    std::printf("# N = %d ranks, %s; size = full buffer, time = slowest rank's mean\n", world,
                dtype_name(dtype));
    std::printf("# %14s %12s %15s %12s %12s %12s\n", "size(B)", "count", "op", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)");
  }
  for (CommOp op : {CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather}) {
    for (int64_t bytes = 1024; bytes <= options.max_bytes; bytes *= 4) {
      const int64_t count = bytes / static_cast<int64_t>(dtype_size(dtype));
      // Zero bytes are 0.0 in every float format; memset keeps OpenMP's
      // thread pool, which would compete with the ranks for cores, unborn.
      Tensor full = backend->empty({count}, dtype, MemoryCategory::kCommBuffers);
      Tensor part = backend->empty({count / world}, dtype, MemoryCategory::kCommBuffers);
      std::memset(full.data(), 0, full.nbytes());
      std::memset(part.data(), 0, part.nbytes());
      auto run = [&] {
        if (op == CommOp::kAllReduce) comm.all_reduce(full);
        if (op == CommOp::kReduceScatter) comm.reduce_scatter(full, part);
        if (op == CommOp::kAllGather) comm.all_gather(part, full);
      };
      run();  // warm-up: staging buffers, TCP windows
      const int reps = iterations(bytes);
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) run();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      slowest.data_as<float>()[0] = static_cast<float>(elapsed.count() / reps);
      comm.all_reduce(slowest, ReduceOp::kMax);
      const double seconds = slowest.data_as<float>()[0];
      if (options.rank == 0) {
        std::printf("  %14lld %12lld %15s %12.1f %12.3f %12.3f\n", static_cast<long long>(bytes),
                    static_cast<long long>(count), comm_op_name(op), seconds * 1e6,
                    algbw_gbps(static_cast<double>(bytes), seconds),
                    busbw_gbps(op, world, static_cast<double>(bytes), seconds));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

// Starts `world` rank processes of this program around one store server
// and waits for them; non-zero when any rank failed.
int launch(const Options& options, int world) {
  TcpStoreServer server;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> args = {"/proc/self/exe",
                                     "--rank",
                                     std::to_string(rank),
                                     "--world",
                                     std::to_string(world),
                                     "--port",
                                     std::to_string(server.port()),
                                     "--max-bytes",
                                     std::to_string(options.max_bytes),
                                     "--dtype",
                                     options.dtype};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
      std::fprintf(stderr, "comm_bench: cannot start rank %d\n", rank);
      return 1;
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) {
  const mixtrain::Options options = mixtrain::parse(argc, argv);
  try {
    if (options.rank >= 0) return mixtrain::run_rank(options);
    for (int world : options.ranks) {
      if (mixtrain::launch(options, world) != 0) return 1;
      std::printf("\n");
      std::fflush(stdout);  // before the next ranks print
    }
  } catch (const mixtrain::EngineError& e) {
    std::fprintf(stderr, "comm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
