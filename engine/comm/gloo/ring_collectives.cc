// Why: see ring_collectives.h. In step s of reduce-scatter, rank r sends
// its partial sum of chunk r-s-1 to r+1 and receives chunk r-s-2 from r-1,
// adding its own contribution; after N-1 steps chunk r is complete on rank
// r. In step s of all-gather, rank r forwards chunk r-s and receives chunk
// r-s-1.
#include "engine/comm/gloo/ring_collectives.h"

#include <algorithm>

#include "engine/comm/cpu_reduce.h"
#include "engine/comm/ring.h"

namespace mixtrain {
namespace {

// Broadcast segment: large enough to amortize a message, small enough
// that a chain of ranks overlaps its hops.
constexpr size_t kBroadcastSegmentBytes = size_t{1} << 20;

}  // namespace

void ring_reduce_scatter(RingLink& link, const std::byte* in, std::byte* out, int64_t n,
                         DType dtype, ReduceOp op, std::byte* scratch) {
  const int world = link.size();
  const int rank = link.rank();
  const size_t element = dtype_size(dtype);
  std::byte* buffers[2] = {scratch,
                           scratch + static_cast<size_t>(ring_chunk(n, world, 0).size) * element};
  const RingChunk first = ring_chunk(n, world, rank - 1);
  const std::byte* send = in + first.offset * element;
  size_t send_bytes = first.size * element;
  for (int step = 0; step < world - 1; ++step) {
    const RingChunk chunk = ring_chunk(n, world, rank - step - 2);
    std::byte* received = buffers[step % 2];
    link.exchange(send, send_bytes, received, chunk.size * element);
    std::byte* sum = step == world - 2 ? out : received;
    reduce_elements(sum, received, in + chunk.offset * element, chunk.size, dtype, op);
    send = sum;
    send_bytes = chunk.size * element;
  }
}

void ring_all_gather(RingLink& link, std::byte* buffer, int64_t n, size_t element_bytes) {
  const int world = link.size();
  const int rank = link.rank();
  for (int step = 0; step < world - 1; ++step) {
    const RingChunk send = ring_chunk(n, world, rank - step);
    const RingChunk recv = ring_chunk(n, world, rank - step - 1);
    link.exchange(buffer + send.offset * element_bytes, send.size * element_bytes,
                  buffer + recv.offset * element_bytes, recv.size * element_bytes);
  }
}

void ring_broadcast(RingLink& link, std::byte* buffer, size_t bytes, int root) {
  const int position = (link.rank() - root + link.size()) % link.size();
  const bool receives = position > 0;
  const bool sends = position < link.size() - 1;
  const size_t segments = (bytes + kBroadcastSegmentBytes - 1) / kBroadcastSegmentBytes;
  auto segment = [&](size_t k) { return buffer + k * kBroadcastSegmentBytes; };
  auto segment_bytes = [&](size_t k) {
    return std::min(kBroadcastSegmentBytes, bytes - k * kBroadcastSegmentBytes);
  };
  if (receives && segments > 0) link.start_recv(segment(0), segment_bytes(0));
  for (size_t k = 0; k < segments; ++k) {
    if (receives) {
      link.finish_recv();
      if (k + 1 < segments) link.start_recv(segment(k + 1), segment_bytes(k + 1));
    }
    if (sends) {
      if (k > 0) link.finish_send();
      link.start_send(segment(k), segment_bytes(k));
    }
  }
  if (sends && segments > 0) link.finish_send();
}

}  // namespace mixtrain
