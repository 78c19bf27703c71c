// Why: see http_server.h.
#include "net/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <vector>

#include "engine/socket/socket_io.h"
#include "engine/common/error.h"
#include "net/error_status.h"

namespace mixtrain::net {
namespace {

constexpr size_t kMaxRequestBytes = 16 * 1024;
// From accept to the last byte of the answer: a client slower than this
// (reading or writing) is dropped.
constexpr std::chrono::seconds kRequestDeadline{5};
// Connections held at once; Prometheus needs one per scrape.
constexpr size_t kMaxConnections = 128;

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Internal Server Error";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    const std::string& listen, std::map<std::string, HttpHandler> routes) {
  absl::StatusOr<std::pair<std::string, int>> host_port = split_host_port(listen, "HTTP address");
  if (!host_port.ok()) return host_port.status();
  const std::string host = host_port->first.empty() ? "0.0.0.0" : host_port->first;
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(routes)));
  try {
    server->listen_fd_ = listen_tcp(host, host_port->second, &server->port_);
  } catch (const EngineError& error) {
    return to_status(error, "HTTP address: ");
  }
  if (pipe2(server->wake_fds_, O_CLOEXEC) != 0) {
    return absl::UnavailableError("cannot listen on " + listen + ": no pipe");
  }
  server->thread_ = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = write(wake_fds_[1], &byte, 1);
    thread_.join();
  }
  for (int fd : wake_fds_) {
    if (fd >= 0) close(fd);
  }
}

struct HttpServer::Connection {
  int fd = -1;
  std::chrono::steady_clock::time_point deadline;  // closed then, answered or not
  std::string request;
  std::string response;  // once the request is complete
  size_t sent = 0;
};

void HttpServer::serve() {
  using Clock = std::chrono::steady_clock;
  std::deque<Connection> connections;  // oldest first
  std::vector<pollfd> fds;
  while (true) {
    const Clock::time_point now = Clock::now();
    std::erase_if(connections, [&](const Connection& c) {
      const bool over = now >= c.deadline || (!c.response.empty() && c.sent == c.response.size());
      if (over) close(c.fd);
      return over;
    });
    fds.assign({{listen_fd_.get(), POLLIN, 0}, {wake_fds_[0], POLLIN, 0}});
    int timeout_ms = -1;
    for (const Connection& c : connections) {
      fds.push_back({c.fd, short(c.response.empty() ? POLLIN : POLLOUT), 0});
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1;
      timeout_ms = timeout_ms < 0 ? int(left) : std::min(timeout_ms, int(left));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      const short ready = fds[i + 2].revents;
      if (ready == 0) continue;
      if (c.response.empty()) {
        char buffer[4096];
        const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
        if (n <= 0) {
          if (n == 0 || (errno != EAGAIN && errno != EINTR)) c.deadline = now;
          continue;
        }
        c.request.append(buffer, size_t(n));
        if (c.request.find("\r\n\r\n") == std::string::npos &&
            c.request.size() < kMaxRequestBytes) {
          continue;
        }
        c.response = respond(c.request);
      }
      const ssize_t n =
          send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += size_t(n);
      } else if (errno != EAGAIN && errno != EINTR) {
        c.deadline = now;
      }
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    if (connections.size() >= kMaxConnections) {  // room for the newcomer
      const auto unanswered = std::find_if(connections.begin(), connections.end(),
                                           [](const Connection& c) { return c.response.empty(); });
      const auto dropped = unanswered != connections.end() ? unanswered : connections.begin();
      close(dropped->fd);
      connections.erase(dropped);
    }
    connections.push_back({.fd = fd, .deadline = Clock::now() + kRequestDeadline});
  }
  for (const Connection& c : connections) close(c.fd);
}

std::string HttpServer::respond(const std::string& request) const {
  HttpResponse response;
  bool head_only = false;
  const size_t method_end = request.find(' ');
  const size_t path_end =
      method_end == std::string::npos ? method_end : request.find(' ', method_end + 1);
  if (path_end == std::string::npos || request.find("\r\n\r\n") == std::string::npos) {
    response = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else {
    const std::string method = request.substr(0, method_end);
    std::string path = request.substr(method_end + 1, path_end - method_end - 1);
    path = path.substr(0, path.find('?'));
    const auto route = routes_.find(path);
    if (route == routes_.end()) {
      response = {404, "text/plain; charset=utf-8", "not found\n"};
    } else if (method != "GET" && method != "HEAD") {
      response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    } else {
      response = route->second();
    }
    if (method == "HEAD") head_only = true;
  }
  return "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
         "\r\nContent-Type: " + response.content_type +
         "\r\nContent-Length: " + std::to_string(response.body.size()) +
         "\r\nConnection: close\r\n\r\n" + (head_only ? std::string() : response.body);
}

}  // namespace mixtrain::net
