// Why: ring collectives cut a buffer of n elements into one chunk per
// rank; the Gloo rings move exactly these chunks and the NCCL communicator
// reports its sent elements from the same cut, so both count alike. With n
// divisible by N (ZeRO pads its buckets) every chunk is n/N and a rank
// sends 2n(N-1)/N elements per all-reduce and n(N-1)/N per reduce-scatter
// or all-gather.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/comm/comm_stats.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

struct RingChunk {
  int64_t offset = 0;  // in elements
  int64_t size = 0;
};

// Chunk `chunk` (any integer, taken modulo world_size) of n elements: the
// first n % world_size chunks hold one element more than the others.
RingChunk ring_chunk(int64_t n, int world_size, int64_t chunk);

// Elements `rank` sends in one ring collective of n elements (the full
// buffer; the reduce-scatter input, the all-gather output): reduce-scatter
// sends every chunk but its own, all-gather every chunk but its successor's,
// all-reduce both; broadcast (a chain from root around the ring) sends n
// from every rank but root's predecessor; barrier sends world_size - 1
// bytes. 0 for world_size 1.
int64_t ring_sent_elements(CommOp op, int64_t n, int world_size, int rank, int root);

// Scratch bytes a ring reduce-scatter (or the all-reduce that starts with
// one) of n elements of `dtype` takes: two chunk buffers, one receiving
// while the other, just reduced, is sent; none for one rank, which runs no
// ring. The memory planner counts what the Gloo communicator allocates by
// this.
size_t ring_reduce_scatter_scratch_bytes(int64_t n, int world_size, DType dtype);

}  // namespace mixtrain
