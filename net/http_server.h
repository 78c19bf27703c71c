// Why: the coordinator serves /metrics and /sd/workers (Prometheus http_sd)
// and each worker agent serves /metrics (DESIGN.md §7). Scrapes are small
// GETs, but the port is open to whoever reaches it: one client sending a
// byte every 4 s once blocked every scrape, and 30 idle sockets made one
// take 120 s (issue 13). So one thread multiplexes every connection with
// poll (non-blocking reads and writes, each connection with a total
// deadline from its accept), holds at most a bounded number and makes
// room for a new one by dropping the oldest still unanswered. It is our
// own rather than civetweb's because civetweb starts its threads with a
// 100 KB stack, too small for the static TLS of a process that links the
// CUDA libraries (pthread_create then fails).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <absl/status/statusor.h>
#include "engine/common/unique_fd.h"
#include "net/net_address.h"

namespace mixtrain::net {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers a GET of its exact path. Called on the server's thread.
using HttpHandler = std::function<HttpResponse()>;

class HttpServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0 picks a free one; host
  // 0.0.0.0 or empty: every interface) and serves each path in `routes`
  // (query strings ignored); other paths get 404, other methods 405.
  // UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT when it
  // is malformed.
  static absl::StatusOr<std::unique_ptr<HttpServer>> start(
      const std::string& listen, std::map<std::string, HttpHandler> routes);
  // Stops listening and closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }  // the port actually bound

 private:
  HttpServer(std::map<std::string, HttpHandler> routes) : routes_(std::move(routes)) {}
  struct Connection;
  void serve();
  // The response to a complete request (or to too large a one).
  std::string respond(const std::string& request) const;

  const std::map<std::string, HttpHandler> routes_;
  UniqueFd listen_fd_;
  int wake_fds_[2] = {-1, -1};  // a byte in wake_fds_[1] ends serve()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace mixtrain::net
