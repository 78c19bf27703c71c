// Why: see comm_stats.h; the factors are those of nccl-tests' PERFORMANCE.md.
#include "engine/comm/comm_stats.h"

namespace mixtrain {

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kBarrier:
      return "barrier";
  }
  return "unknown";
}

CommOpStats CommStats::total() const {
  CommOpStats sum;
  for (const CommOpStats& s : ops) {
    sum.calls += s.calls;
    sum.elements_sent += s.elements_sent;
    sum.bytes_sent += s.bytes_sent;
    sum.seconds += s.seconds;
  }
  return sum;
}

CommStats CommStats::since(const CommStats& earlier) const {
  CommStats delta;
  for (int i = 0; i < kNumCommOps; ++i) {
    delta.ops[i].calls = ops[i].calls - earlier.ops[i].calls;
    delta.ops[i].elements_sent = ops[i].elements_sent - earlier.ops[i].elements_sent;
    delta.ops[i].bytes_sent = ops[i].bytes_sent - earlier.ops[i].bytes_sent;
    delta.ops[i].seconds = ops[i].seconds - earlier.ops[i].seconds;
  }
  return delta;
}

double algbw_gbps(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

double busbw_factor(CommOp op, int world_size) {
  const double n = world_size;
  switch (op) {
    case CommOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CommOp::kReduceScatter:
    case CommOp::kAllGather:
      return (n - 1) / n;
    case CommOp::kBroadcast:
      return 1.0;
    case CommOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

double busbw_gbps(CommOp op, int world_size, double bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * busbw_factor(op, world_size);
}

}  // namespace mixtrain
