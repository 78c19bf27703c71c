// Why: see listen_security.h.
#include "server/listen_security.h"

#include "net/net_address.h"

namespace mixtrain::server {

std::string default_listen(bool client_token, bool join_token) {
  return client_token && join_token ? "0.0.0.0:50051" : "127.0.0.1:50051";
}

std::string default_http_listen(bool client_token, bool join_token) {
  return client_token && join_token ? "0.0.0.0:9400" : "127.0.0.1:9400";
}

absl::StatusOr<std::string> check_listen_security(const std::string& listen,
                                                  const std::string& http_listen, bool client_token,
                                                  bool join_token, bool insecure) {
  if (client_token && join_token) return std::string();
  std::string missing, open;
  if (!client_token) {
    missing = "--auth-token-file";
    open = "list, submit and cancel jobs";
  }
  if (!join_token) {
    missing += std::string(missing.empty() ? "" : " and ") + "--join-token-file";
    open += std::string(open.empty() ? "" : ", ") +
            "register workers, publish scrape targets in /sd/workers and write rendezvous keys";
  }
  const absl::StatusOr<std::pair<std::string, int>> host_port =
      net::split_host_port(listen, "--listen");
  if (!host_port.ok()) return host_port.status();
  const bool loopback = !net::loopback_resolution(host_port->first).empty();
  if (!loopback && !insecure) {
    return absl::InvalidArgumentError(
        "refusing to serve on " + listen + " without " + missing +
        ": anyone who can reach it could " + open +
        ". Give the token file(s), listen on loopback (--listen 127.0.0.1:PORT), or pass "
        "--insecure to serve unauthenticated anyway");
  }
  return "WARNING: no " + missing + ": " +
         (loopback ? "every local user and process" : "anyone who can reach " + listen) + " can " +
         open + " without a token" + (loopback ? "" : " (--insecure)") +
         "; /metrics and /sd/workers (never authenticated) are served on " + http_listen +
         " (loopback unless --http says otherwise)";
}

}  // namespace mixtrain::server
