// Why: ranks on different hosts must reach each other's data sockets (Gloo,
// NCCL's bootstrap) and Prometheus must reach every worker's /metrics, so
// each worker advertises an address its peers can route to. These helpers
// find that address (the local end of this host's route to the
// coordinator, or an interface's address), name the interface holding it
// (NCCL_SOCKET_IFNAME), and tell loopback names apart, since Debian maps
// a host's own name to 127.0.1.1, which no other host can reach.
#pragma once

#include <string>
#include <utility>

#include <absl/status/statusor.h>

namespace mixtrain::net {

// "HOST:PORT" (or "[V6]:PORT") split into its parts, brackets removed;
// INVALID_ARGUMENT naming `what` when it is not one.
absl::StatusOr<std::pair<std::string, int>> split_host_port(const std::string& address,
                                                            const std::string& what);

// The local address this host would send from to reach `address`
// (HOST:PORT): a UDP socket is connected, which sends nothing, and its
// name read. UNAVAILABLE when the host does not resolve or has no route.
absl::StatusOr<std::string> route_source_address(const std::string& address);

// The first IPv4 address (else IPv6) of network interface `name`;
// NOT_FOUND naming it when it does not exist or has no address.
absl::StatusOr<std::string> interface_address(const std::string& name);

// The name of the interface holding the numeric `address`; "" when none
// does (a name, or an address of another host).
std::string interface_holding(const std::string& address);

// The first loopback address `host` resolves to (127.0.0.0/8, ::1), or ""
// when it resolves to none (or does not resolve).
std::string loopback_resolution(const std::string& host);

// The mixtrain-worker flags that set its data address and the host of its
// metrics address, named in refusals.
inline constexpr char kDataAddressFix[] = "--data-address ADDR or --data-iface NAME";
inline constexpr char kMetricsAddressFix[] = "--advertise-host HOST";

// OK unless `host` resolves to a loopback address while `seen_from`, the
// address the coordinator sees the worker call from, is not one (then no
// other host can connect to it): INVALID_ARGUMENT "<what> \"<host>\"
// resolves to the loopback address A, which no other host can reach (the
// worker calls from <seen_from>): start the worker with <fix>".
absl::Status check_reachable_from_other_hosts(const std::string& what, const std::string& host,
                                              const std::string& seen_from,
                                              const std::string& fix);

// The host part of a gRPC peer string ("ipv4:10.0.0.2:5123",
// "ipv6:[::1]:5123"); "" for other kinds (unix sockets).
std::string grpc_peer_host(const std::string& peer);

}  // namespace mixtrain::net
