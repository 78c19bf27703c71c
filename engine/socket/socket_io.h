// Why: the TCP store's server and client, Gloo's ring links and the
// service's HTTP server share these few socket helpers: connecting with
// retry, listening on a free port, and length-prefixed frames read and
// written against a deadline. Writes never raise SIGPIPE,
// so a peer that vanishes is an error value, not a crash.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "engine/common/unique_fd.h"

namespace mixtrain {

using SteadyTime = std::chrono::steady_clock::time_point;
// A deadline that never passes.
inline constexpr SteadyTime kNoDeadline = SteadyTime::max();

// "5", "0.25": a duration in seconds, for error messages.
std::string format_seconds(std::chrono::milliseconds duration);

// Connects to host:port (TCP_NODELAY), retrying while nothing listens there
// yet, until `deadline`. Throws EngineError(kUnavailable) naming host:port
// and the last error.
UniqueFd connect_tcp(const std::string& host, int port, SteadyTime deadline);

// A listening socket on host:port; port 0 picks a free port. Stores the
// bound port in *bound_port. Throws EngineError(kUnavailable) naming
// host:port when it cannot bind.
UniqueFd listen_tcp(const std::string& host, int port, int* bound_port);

enum class IoStatus {
  kOk,
  kClosed,    // the peer closed the connection or it broke
  kTimeout,   // the deadline passed
  kTooLarge,  // an incoming frame announced more than the allowed bytes
};

// Writes `body` as one frame (little_endian.h: its size in 4 bytes, then it).
IoStatus write_frame(int fd, std::string_view body, SteadyTime deadline);

// Reads one frame into *body. A length above `max_bytes` is kTooLarge (the
// body is not read: the caller drops the connection).
IoStatus read_frame(int fd, std::string* body, size_t max_bytes, SteadyTime deadline);

}  // namespace mixtrain
