// Why: see ring_link.h. Gloo reports a peer's death and a timeout alike,
// as gloo::IoException from the send/recv calls or their waits (this Gloo
// has no exception type of its own for a timeout, and its message text is
// no contract), and a timeout poisons the whole context, which is fine:
// the communicator gives up on its ring after any failure. A failure that
// comes once the deadline this link gave Gloo has passed is the timeout;
// one before it is the peer's.
#include "engine/comm/gloo/ring_link.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>

namespace mixtrain {
namespace {

// Gloo's message without its "[file:line] " prefix.
std::string gloo_detail(const char* what) {
  std::string message(what);
  const size_t end = message.rfind("] ");
  return message.front() == '[' && end != std::string::npos ? message.substr(end + 2) : message;
}

// Time left before `deadline`; at least 1 ms so Gloo still checks once.
std::chrono::milliseconds remaining(SteadyTime deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// Runs f, turning Gloo errors into PeerFailure(peer), timed out when they
// came at or after `deadline`.
template <class F>
void guard(int peer, SteadyTime deadline, F&& f) {
  try {
    f();
  } catch (const gloo::Exception& e) {
    throw PeerFailure(peer, std::chrono::steady_clock::now() >= deadline, gloo_detail(e.what()));
  }
}

}  // namespace

RingLink::RingLink(gloo::Context& context, uint64_t slot, SteadyTime deadline)
    : context_(context),
      slot_(slot),
      deadline_(deadline),
      rank_(context.rank),
      size_(context.size),
      next_((context.rank + 1) % context.size),
      prev_((context.rank + context.size - 1) % context.size) {}

RingLink::~RingLink() = default;

void RingLink::start_send(const void* data, size_t bytes) {
  send_ = context_.createUnboundBuffer(const_cast<void*>(data), bytes);
  guard(next_, deadline_, [&] { send_->send(next_, slot_); });
  bytes_sent_ += static_cast<int64_t>(bytes);
}

void RingLink::start_recv(void* data, size_t bytes) {
  recv_ = context_.createUnboundBuffer(data, bytes);
  guard(prev_, deadline_, [&] { recv_->recv(prev_, slot_); });
}

void RingLink::finish_send() {
  guard(next_, deadline_, [&] {
    if (!send_->waitSend(remaining(deadline_))) throw PeerFailure(next_, false, "send aborted");
  });
  send_.reset();
}

void RingLink::finish_recv() {
  guard(prev_, deadline_, [&] {
    if (!recv_->waitRecv(remaining(deadline_))) throw PeerFailure(prev_, false, "recv aborted");
  });
  recv_.reset();
}

void RingLink::exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes) {
  if (recv_bytes > 0) start_recv(recv, recv_bytes);
  if (send_bytes > 0) start_send(send, send_bytes);
  if (recv_bytes > 0) finish_recv();
  if (send_bytes > 0) finish_send();
}

}  // namespace mixtrain
