// Why: addresses travel as "HOST:PORT" text (flags, MIXTRAIN_STORE, what a
// worker registers), and an IPv6 host holds colons of its own, so it is
// written in brackets ("[::1]:5000"). Every reader and writer of that form
// goes through these two functions, from the rank environment up to the
// service's flags (net/net_address.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mixtrain {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;      // 0..65535
};

// "HOST:PORT" or "[V6]:PORT" split at its last colon, brackets removed;
// nullopt when there is no host or the port is not a number in 0..65535.
std::optional<HostPort> parse_host_port(std::string_view address);

// `host` and `port` as "HOST:PORT", an IPv6 host in brackets.
std::string join_host_port(std::string_view host, int port);

}  // namespace mixtrain
