// Why: see tcp_store.h. Every request is parsed in full before it touches
// the store, so a malformed one changes nothing; every exception a
// connection thread meets ends that connection only.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "engine/comm/store_protocol.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

// More concurrent clients than this are refused (closed at once).
constexpr size_t kMaxConnections = 1024;
// A client that stops reading its replies is dropped after this long.
constexpr auto kReplyWriteTimeout = std::chrono::seconds(30);
// Blocking requests wait at most this long, whatever the client asked.
constexpr int64_t kMaxWaitMs = int64_t{7} * 24 * 3600 * 1000;

struct Request {
  StoreOp op;
  std::vector<std::string> keys;
  std::string value;
  int64_t number = 0;  // timeout_ms for get/wait, delta for add
};

Request parse_request(std::string_view body) {
  WireReader in(body);
  Request request;
  const uint8_t op = in.u8();
  request.op = static_cast<StoreOp>(op);
  switch (request.op) {
    case StoreOp::kSet:
      request.keys.emplace_back(in.bytes());
      request.value = in.bytes();
      break;
    case StoreOp::kGet:
    case StoreOp::kAdd:
      request.keys.emplace_back(in.bytes());
      request.number = in.i64();
      break;
    case StoreOp::kWait: {
      const uint32_t count = in.u32();
      for (uint32_t i = 0; i < count; ++i) request.keys.emplace_back(in.bytes());
      request.number = in.i64();
      break;
    }
    default:
      throw EngineError(ErrorCode::kInvalidArgument,
                        "malformed store message: unknown op " + std::to_string(op));
  }
  in.expect_end();
  return request;
}

std::string error_reply(const EngineError& e) {
  const StoreStatus status = e.code() == ErrorCode::kInvalidArgument ? StoreStatus::kInvalidArgument
                                                                     : StoreStatus::kUnavailable;
  return WireWriter().u8(static_cast<uint8_t>(status)).bytes(e.what()).body();
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port) : host_(host) {
  listen_fd_ = listen_tcp(host, port, &port_);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw EngineError(ErrorCode::kInternal, "store server: pipe2 failed");
  }
  wake_read_ = UniqueFd(pipe_fds[0]);
  wake_write_ = UniqueFd(pipe_fds[1]);
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char stop = 1;
  while (write(wake_write_.get(), &stop, 1) < 0 && errno == EINTR) {
  }
  accept_thread_.join();
  store_.close();  // fails every blocked get/wait at once
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& connection : connections_) shutdown(connection->fd.get(), SHUT_RDWR);
  for (auto& connection : connections_) connection->thread.join();
}

void TcpStoreServer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // the client gave up already, or out of descriptors
    std::lock_guard<std::mutex> lock(mu_);
    connections_.remove_if([](const std::unique_ptr<Connection>& c) {
      if (!c->finished) return false;
      c->thread.join();
      return true;
    });
    if (connections_.size() >= kMaxConnections) continue;  // refused: fd closes here
    auto connection = std::make_unique<Connection>();
    connection->fd = std::move(fd);
    try {
      connection->thread = std::thread([this, c = connection.get()] { serve(*c); });
    } catch (const std::system_error&) {
      continue;  // no thread for it: refuse this client, keep serving the others
    }
    connections_.push_back(std::move(connection));
  }
}

void TcpStoreServer::serve(Connection& connection) {
  try {
    std::string request;
    for (;;) {
      const IoStatus status =
          read_frame(connection.fd.get(), &request, kMaxStoreFrameBytes, kNoDeadline);
      bool close_after = status == IoStatus::kTooLarge;
      std::string reply;
      if (status == IoStatus::kTooLarge) {
        reply = error_reply(
            EngineError(ErrorCode::kInvalidArgument, "malformed store message: frame too large"));
      } else if (status == IoStatus::kOk) {
        reply = handle(request, &close_after);
      } else {
        break;
      }
      const auto deadline = std::chrono::steady_clock::now() + kReplyWriteTimeout;
      if (write_frame(connection.fd.get(), reply, deadline) != IoStatus::kOk || close_after) break;
    }
  } catch (...) {
    // Out of memory or a broken invariant in one request: drop this client only.
  }
  shutdown(connection.fd.get(), SHUT_RDWR);
  connection.finished = true;
}

std::string TcpStoreServer::handle(std::string_view body, bool* close_after) {
  Request request;
  try {
    request = parse_request(body);
  } catch (const EngineError& e) {
    *close_after = true;
    return error_reply(e);
  }
  const auto timeout =
      std::chrono::milliseconds(std::clamp<int64_t>(request.number, 0, kMaxWaitMs));
  WireWriter ok;
  ok.u8(static_cast<uint8_t>(StoreStatus::kOk));
  try {
    switch (request.op) {
      case StoreOp::kSet:
        store_.set(request.keys[0], request.value);
        break;
      case StoreOp::kGet:
        ok.bytes(store_.get(request.keys[0], timeout));
        break;
      case StoreOp::kWait:
        store_.wait(request.keys, timeout);
        break;
      case StoreOp::kAdd:
        ok.i64(store_.add(request.keys[0], request.number));
        break;
    }
  } catch (const EngineError& e) {
    return error_reply(e);
  }
  return ok.body();
}

}  // namespace mixtrain
