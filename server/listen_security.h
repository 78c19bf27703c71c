// Why: a coordinator started without token files used to listen on
// 0.0.0.0 with no authentication and no word about it: anyone who could
// reach it listed and cancelled jobs, registered workers, published scrape
// targets for Prometheus and wrote rendezvous keys (issue 13). Without
// both tokens it now listens on loopback by default, refuses any other
// address unless --insecure says the operator means it, and says plainly
// what is open whenever something is. The HTTP port (/metrics,
// /sd/workers, never authenticated) follows the same default (issue 29).
#pragma once

#include <string>

#include <absl/status/statusor.h>

namespace mixtrain::server {

// What --listen is when not given: every interface with both tokens,
// loopback otherwise.
std::string default_listen(bool client_token, bool join_token);
// What --http is when not given: every interface with both tokens,
// loopback otherwise.
std::string default_http_listen(bool client_token, bool join_token);

// The warning to print about serving on `listen` (and HTTP on
// `http_listen`) with these tokens ("" when both services require a token). INVALID_ARGUMENT naming
// the missing token files and --insecure when `listen` is not a loopback address and a token is
// missing without `insecure`.
absl::StatusOr<std::string> check_listen_security(const std::string& listen,
                                                  const std::string& http_listen, bool client_token,
                                                  bool join_token, bool insecure);

}  // namespace mixtrain::server
