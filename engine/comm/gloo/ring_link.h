// Why: a ring collective only ever talks to two peers, the next rank
// (rank + 1) and the previous one (rank - 1), mod world_size. RingLink is
// that pair of directed links for one collective over a Gloo context:
// transfers into and out of caller memory (Gloo unbound buffers), each
// wait bounded by the collective's deadline, sent bytes counted, and every
// Gloo failure turned into a PeerFailure naming the peer it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/socket/socket_io.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace mixtrain {

// A transfer with `peer` failed: it closed the connection (or the link
// broke) or did not complete it before the deadline.
class PeerFailure : public std::runtime_error {
 public:
  PeerFailure(int peer, bool timed_out, const std::string& detail)
      : std::runtime_error(detail), peer_(peer), timed_out_(timed_out) {}
  int peer() const { return peer_; }
  bool timed_out() const { return timed_out_; }

 private:
  int peer_;
  bool timed_out_;
};

class RingLink {
 public:
  // Transfers of one collective use Gloo slot `slot` (every rank numbers
  // its collectives alike) and must finish by `deadline`.
  RingLink(gloo::Context& context, uint64_t slot, SteadyTime deadline);
  ~RingLink();
  RingLink(const RingLink&) = delete;
  RingLink& operator=(const RingLink&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Starts sending `bytes` at `data` to the next rank / receiving them
  // from the previous one. At most one send and one receive are in flight;
  // the memory must stay untouched until the matching finish_*().
  void start_send(const void* data, size_t bytes);
  void start_recv(void* data, size_t bytes);
  // Wait for the transfer started last. Throw PeerFailure.
  void finish_send();
  void finish_recv();
  // One ring step: sends to the next rank while receiving from the
  // previous one, and waits for both. Zero-byte sides are skipped.
  void exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes);

  // Bytes sent so far.
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  gloo::Context& context_;
  const uint64_t slot_;
  const SteadyTime deadline_;
  const int rank_, size_, next_, prev_;
  std::unique_ptr<gloo::transport::UnboundBuffer> send_, recv_;
  int64_t bytes_sent_ = 0;
};

}  // namespace mixtrain
