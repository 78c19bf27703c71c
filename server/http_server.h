// Why: the coordinator serves /metrics and /sd/workers (Prometheus http_sd)
// and each worker agent serves /metrics (DESIGN.md §7); one small HTTP
// server over civetweb does both, so Prometheus scrapes real endpoints.
// Handlers run on civetweb's threads and must be thread safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace mixtrain::server {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers a GET of its exact path.
using HttpHandler = std::function<HttpResponse()>;

class HttpServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0 picks a free one) and serves
  // each path in `routes`; other paths get 404. UNAVAILABLE when the
  // address cannot be bound, INVALID_ARGUMENT when it is malformed.
  static absl::StatusOr<std::unique_ptr<HttpServer>> start(
      const std::string& listen, std::map<std::string, HttpHandler> routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }  // the port actually bound

 private:
  explicit HttpServer(std::map<std::string, HttpHandler> routes) : routes_(std::move(routes)) {}
  static int handle(::mg_connection* connection, void* route);

  const std::map<std::string, HttpHandler> routes_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

// "HOST:PORT" split into its parts; INVALID_ARGUMENT naming `what` when it
// is not one (a bracketed IPv6 host keeps its brackets).
absl::StatusOr<std::pair<std::string, int>> split_host_port(const std::string& address,
                                                            const std::string& what);

}  // namespace mixtrain::server
