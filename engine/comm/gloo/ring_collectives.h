// Why: the collectives ZeRO needs, as ring algorithms over a RingLink, so
// that each rank sends exactly the ring's element counts and reduced
// results carry the same bits on every rank: reduce-scatter adds each
// chunk hop by hop around the ring (rounding to the dtype after every hop,
// as NCCL does), all-gather then copies the finished chunks, unchanged,
// to every rank. Chunks follow ring.h, so n need not divide by N.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/comm/communicator.h"
#include "engine/comm/gloo/ring_link.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

// out (chunk link.rank() of n elements, ring.h) = op over every rank's
// `in` chunk, in fp32 rounded to dtype after each hop: the chunk c sum
// starts at rank c+1 and adds ranks c+2, ..., c in ring order. `in` is
// read only; out may be in's own chunk. Takes `scratch` of
// ring_reduce_scatter_scratch_bytes() (ring.h).
void ring_reduce_scatter(RingLink& link, const std::byte* in, std::byte* out, int64_t n,
                         DType dtype, ReduceOp op, std::byte* scratch);

// `buffer` holds n elements of element_bytes each, of which this rank's
// chunk (ring.h) is filled; on return every chunk is.
void ring_all_gather(RingLink& link, std::byte* buffer, int64_t n, size_t element_bytes);

// Copies root's `bytes` bytes at `buffer` to every rank: a chain from root
// around the ring, pipelined in segments.
void ring_broadcast(RingLink& link, std::byte* buffer, size_t bytes, int root);

}  // namespace mixtrain
