// Why: see http_server.h.
#include "http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mixtrain::server {
namespace {

constexpr size_t kMaxRequestBytes = 16 * 1024;
constexpr int kRequestTimeoutMs = 5'000;

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

void write_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    const std::string& listen, std::map<std::string, HttpHandler> routes) {
  absl::StatusOr<std::pair<std::string, int>> host_port = split_host_port(listen, "HTTP address");
  if (!host_port.ok()) return host_port.status();
  std::string host = host_port->first;
  if (host.empty()) host = "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(host_port->second).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError("HTTP address: cannot resolve \"" + host + "\"");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(routes)));
  server->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  const bool bound = server->listen_fd_ >= 0 &&
                     bind(server->listen_fd_, found->ai_addr, found->ai_addrlen) == 0 &&
                     ::listen(server->listen_fd_, 64) == 0;
  const std::string why = std::strerror(errno);
  freeaddrinfo(found);
  if (!bound) return absl::UnavailableError("cannot listen on " + listen + ": " + why);
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  server->port_ = ntohs(address.sin_port);
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
  for (int fd : {listen_fd_, wake_fds_[0], wake_fds_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void HttpServer::serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    answer(connection);
    close(connection);
  }
}

void HttpServer::answer(int connection) {
  // One request per connection ("Connection: close"); a client that sends
  // nothing for kRequestTimeoutMs is dropped so it cannot stall the rest.
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    pollfd readable{connection, POLLIN, 0};
    if (poll(&readable, 1, kRequestTimeoutMs) <= 0) return;
    const ssize_t n = recv(connection, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  HttpResponse response;
  bool head_only = false;
  const size_t method_end = request.find(' ');
  const size_t path_end =
      method_end == std::string::npos ? method_end : request.find(' ', method_end + 1);
  if (path_end == std::string::npos) {
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
  write_all(connection,
            "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
                "\r\nContent-Type: " + response.content_type +
                "\r\nContent-Length: " + std::to_string(response.body.size()) +
                "\r\nConnection: close\r\n\r\n" + (head_only ? std::string() : response.body));
}

}  // namespace mixtrain::server
