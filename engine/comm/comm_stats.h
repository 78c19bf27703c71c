// Why: ZeRO's summary reports the elements and bytes each rank sent per
// step, the worker exports bytes and seconds per collective to Prometheus,
// and the benchmark prints bandwidths the way nccl-tests does. All of them
// read these counters and helpers, so the numbers agree everywhere.
#pragma once

#include <array>
#include <cstdint>

namespace mixtrain {

enum class CommOp : int { kAllReduce = 0, kReduceScatter, kAllGather, kBroadcast, kBarrier };
inline constexpr int kNumCommOps = 5;

// "all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"
// (the `op` label of mixtrain_collective_bytes_total).
const char* comm_op_name(CommOp op);

// Counters of one kind of collective on one rank.
struct CommOpStats {
  int64_t calls = 0;
  int64_t elements_sent = 0;  // tensor elements this rank sent (a barrier counts bytes)
  int64_t bytes_sent = 0;
  double seconds = 0.0;  // wall time of the ops on the communicator's thread
};

struct CommStats {
  std::array<CommOpStats, kNumCommOps> ops{};

  CommOpStats& operator[](CommOp op) { return ops[static_cast<int>(op)]; }
  const CommOpStats& operator[](CommOp op) const { return ops[static_cast<int>(op)]; }
  // Every op kind added up.
  CommOpStats total() const;
  // What happened between `earlier` (a previous snapshot) and this one:
  // e.g. the elements sent in one training step.
  CommStats since(const CommStats& earlier) const;
};

// nccl-tests' algorithm bandwidth in GB/s (1e9 bytes/s): S / t, where S is
// the full buffer: the all-reduce and broadcast buffer, the reduce-scatter
// input, the all-gather output.
double algbw_gbps(double bytes, double seconds);

// nccl-tests' bus bandwidth factor for N ranks: 2(N-1)/N for all-reduce,
// (N-1)/N for reduce-scatter and all-gather, 1 for broadcast (0 for barrier,
// which moves no data).
double busbw_factor(CommOp op, int world_size);

// algbw_gbps(bytes, seconds) * busbw_factor(op, world_size).
double busbw_gbps(CommOp op, int world_size, double bytes, double seconds);

}  // namespace mixtrain
