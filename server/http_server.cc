// Why: see http_server.h.
#include "http_server.h"

#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <mutex>

namespace mixtrain::server {
namespace {

// A free TCP port, found by binding port 0 (civetweb cannot pick one).
int pick_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> split_host_port(const std::string& address,
                                                            const std::string& what) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0) {
    const char* begin = address.data() + colon + 1;
    const char* end = address.data() + address.size();
    const auto [last, error] = std::from_chars(begin, end, port);
    if (error != std::errc() || last != end || begin == end) port = -1;
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(what + ": expected HOST:PORT, got \"" + address + "\"");
  }
  return std::make_pair(address.substr(0, colon), port);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    const std::string& listen, std::map<std::string, HttpHandler> routes) {
  absl::StatusOr<std::pair<std::string, int>> host_port = split_host_port(listen, "HTTP address");
  if (!host_port.ok()) return host_port.status();
  static std::once_flag initialized;
  std::call_once(initialized, [] { mg_init_library(0); });

  std::unique_ptr<HttpServer> server(new HttpServer(std::move(routes)));
  // Port 0 asks for a free port; civetweb needs a number, so one is picked
  // and retried a few times in case another process takes it meanwhile.
  const int attempts = host_port->second == 0 ? 5 : 1;
  for (int attempt = 0; attempt < attempts && server->context_ == nullptr; ++attempt) {
    const int port = host_port->second == 0 ? pick_free_port() : host_port->second;
    std::string host = host_port->first;
    if (host == "0.0.0.0" || host.empty()) host.clear();
    const std::string ports = (host.empty() ? "" : host + ":") + std::to_string(port);
    const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "4", nullptr};
    mg_callbacks callbacks{};
    callbacks.log_message = [](const ::mg_connection*, const char*) -> int { return 1; };  // quiet
    server->context_ = mg_start(&callbacks, nullptr, options);
    server->port_ = port;
  }
  if (server->context_ == nullptr) return absl::UnavailableError("cannot listen on " + listen);
  for (const auto& route : server->routes_) {
    mg_set_request_handler(server->context_, route.first.c_str(), &HttpServer::handle,
                           const_cast<std::pair<const std::string, HttpHandler>*>(&route));
  }
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpServer::handle(::mg_connection* connection, void* route) {
  const mg_request_info* request = mg_get_request_info(connection);
  const auto& [path, handler] =
      *static_cast<const std::pair<const std::string, HttpHandler>*>(route);
  const std::string method = request->request_method;
  HttpResponse response;
  // civetweb also hands longer paths ("/metrics/x") to a handler; only the
  // exact path is ours.
  if (request->local_uri == nullptr || path != request->local_uri) {
    response = {404, "text/plain; charset=utf-8", "not found\n"};
  } else if (method != "GET" && method != "HEAD") {
    response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else {
    response = handler();
  }
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            response.status, mg_get_response_code_text(connection, response.status),
            response.content_type.c_str(), response.body.size());
  if (method != "HEAD") {
    mg_write(connection, response.body.data(), response.body.size());
  }
  return response.status;
}

}  // namespace mixtrain::server
