// Why: see ring.h.
#include "engine/comm/ring.h"

namespace mixtrain {

RingChunk ring_chunk(int64_t n, int world_size, int64_t chunk) {
  const int64_t c = ((chunk % world_size) + world_size) % world_size;
  const int64_t base = n / world_size;
  const int64_t extra = n % world_size;
  return {c * base + (c < extra ? c : extra), base + (c < extra ? 1 : 0)};
}

int64_t ring_sent_elements(CommOp op, int64_t n, int world_size, int rank, int root) {
  if (world_size == 1) return 0;
  const int64_t own = ring_chunk(n, world_size, rank).size;
  const int64_t successor = ring_chunk(n, world_size, rank + 1).size;
  switch (op) {
    case CommOp::kAllReduce:
      return 2 * n - own - successor;
    case CommOp::kReduceScatter:
      return n - own;
    case CommOp::kAllGather:
      return n - successor;
    case CommOp::kBroadcast:
      return (rank + 1) % world_size == root ? 0 : n;
    case CommOp::kBarrier:
      return world_size - 1;
  }
  return 0;
}

size_t ring_reduce_scatter_scratch_bytes(int64_t n, int world_size, DType dtype) {
  if (world_size <= 1) return 0;
  return 2 * static_cast<size_t>(ring_chunk(n, world_size, 0).size) * dtype_size(dtype);
}

}  // namespace mixtrain
