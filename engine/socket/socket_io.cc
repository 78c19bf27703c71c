// Why: see socket_io.h. Every wait is a poll() bounded by the deadline, so
// no call here can block past it; EINTR is retried everywhere.
#include "engine/socket/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "engine/common/error.h"
#include "engine/common/host_port.h"
#include "engine/common/little_endian.h"

namespace mixtrain {
namespace {

// Addresses of host:port for a TCP socket; passive for binding.
std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> resolve(const std::string& host, int port,
                                                           bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    throw EngineError(ErrorCode::kUnavailable,
                      "cannot resolve " + join_host_port(host, port) + ": " + gai_strerror(rc));
  }
  return {list, &freeaddrinfo};
}

// Milliseconds poll() may wait before `deadline`; -1 for none.
int poll_timeout_ms(SteadyTime deadline) {
  if (deadline == kNoDeadline) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

// Waits until fd is ready for `events`; false when the deadline passed.
bool wait_ready(int fd, short events, SteadyTime deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // the read or write reports the error
  }
}

// Moves `size` bytes with `io` (a non-blocking send or recv on fd),
// waiting for `events` whenever the socket is not ready.
template <class Io>
IoStatus transfer_all(int fd, char* data, size_t size, short events, SteadyTime deadline, Io io) {
  while (size > 0) {
    const ssize_t n = io(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, events, deadline)) return IoStatus::kTimeout;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return IoStatus::kClosed;  // recv 0: orderly close; < 0: reset or other error
    }
  }
  return IoStatus::kOk;
}

IoStatus write_all(int fd, const char* data, size_t size, SteadyTime deadline) {
  return transfer_all(
      fd, const_cast<char*>(data), size, POLLOUT, deadline,
      [](int f, char* p, size_t n) { return send(f, p, n, MSG_NOSIGNAL | MSG_DONTWAIT); });
}

IoStatus read_all(int fd, char* data, size_t size, SteadyTime deadline) {
  return transfer_all(fd, data, size, POLLIN, deadline,
                      [](int f, char* p, size_t n) { return recv(f, p, n, MSG_DONTWAIT); });
}

void set_no_delay(int fd) {
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

}  // namespace

std::string format_seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

UniqueFd connect_tcp(const std::string& host, int port, SteadyTime deadline) {
  std::string last_error = "timed out";
  for (;;) {
    const auto addresses = resolve(host, port, /*passive=*/false);
    for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
      UniqueFd fd(
          socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!fd.valid()) {
        last_error = std::strerror(errno);
        continue;
      }
      int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_ready(fd.get(), POLLOUT, deadline)) break;
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        rc = error == 0 ? 0 : -1;
        errno = error;
      }
      if (rc == 0) {
        set_no_delay(fd.get());
        return fd;
      }
      last_error = std::strerror(errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    // Nothing listens yet (the server starts in parallel): try again soon.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw EngineError(ErrorCode::kUnavailable,
                    "cannot connect to " + join_host_port(host, port) + ": " + last_error);
}

UniqueFd listen_tcp(const std::string& host, int port, int* bound_port) {
  std::string last_error = "no address";
  const auto addresses = resolve(host, port, /*passive=*/true);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    const int on = 1;
    if (!fd.valid() || setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || listen(fd.get(), 128) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
    *bound_port = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return fd;
  }
  throw EngineError(ErrorCode::kUnavailable,
                    "cannot listen on " + join_host_port(host, port) + ": " + last_error);
}

IoStatus write_frame(int fd, std::string_view body, SteadyTime deadline) {
  // One send for header and body: two small writes would meet Nagle's
  // algorithm and the peer's delayed ACK (40 ms per round trip).
  const std::string frame = encode_frame(body);
  return write_all(fd, frame.data(), frame.size(), deadline);
}

IoStatus read_frame(int fd, std::string* body, size_t max_bytes, SteadyTime deadline) {
  char header[kFrameHeaderBytes];
  const IoStatus status = read_all(fd, header, sizeof(header), deadline);
  if (status != IoStatus::kOk) return status;
  const size_t size = frame_body_size(std::string_view(header, sizeof(header)));
  if (size > max_bytes) return IoStatus::kTooLarge;
  body->resize(size);
  return read_all(fd, body->data(), size, deadline);
}

}  // namespace mixtrain
