// Why: see net_address.h.
#include "net/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include "engine/common/host_port.h"

namespace mixtrain::net {
namespace {

// The numeric form of `address` (IPv4 or IPv6); "" for another family.
std::string numeric_host(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&ip)) return ip.s6_addr[12] == 127;
  }
  return false;
}

struct AddrinfoFree {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using Addrinfo = std::unique_ptr<addrinfo, AddrinfoFree>;

// `host` resolved (numeric or by name); nullptr with `error` set on failure.
Addrinfo resolve(const std::string& host, int socktype, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    error = "cannot resolve \"" + host + "\": " + gai_strerror(rc);
    return nullptr;
  }
  return Addrinfo(found);
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> split_host_port(const std::string& address,
                                                            const std::string& what) {
  std::optional<HostPort> parsed = parse_host_port(address);
  if (!parsed) {
    return absl::InvalidArgumentError(what + ": expected HOST:PORT, got \"" + address + "\"");
  }
  return std::make_pair(std::move(parsed->host), parsed->port);
}

absl::StatusOr<std::string> route_source_address(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> host_port = split_host_port(address, "address");
  if (!host_port.ok()) return host_port.status();
  std::string error;
  const Addrinfo found = resolve(host_port->first, SOCK_DGRAM, error);
  if (!found) return absl::UnavailableError(error);
  for (const addrinfo* candidate = found.get(); candidate != nullptr;
       candidate = candidate->ai_next) {
    sockaddr_storage target{};
    std::memcpy(&target, candidate->ai_addr, candidate->ai_addrlen);
    const uint16_t port = htons(static_cast<uint16_t>(host_port->second));
    if (target.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&target)->sin_port = port;
    if (target.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&target)->sin6_port = port;
    const int fd = socket(target.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    const bool routed =
        connect(fd, reinterpret_cast<const sockaddr*>(&target), candidate->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
    error = std::strerror(errno);
    close(fd);
    if (routed) return numeric_host(reinterpret_cast<const sockaddr*>(&local));
  }
  return absl::UnavailableError("no route to " + address + ": " + error);
}

absl::StatusOr<std::string> interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::UnavailableError(std::string("cannot list network interfaces: ") +
                                  std::strerror(errno));
  }
  std::string v4;
  std::string v6;
  bool exists = false;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (name != entry->ifa_name) continue;
    exists = true;
    if (entry->ifa_addr == nullptr) continue;
    if (entry->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = numeric_host(entry->ifa_addr);
    if (entry->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      const auto* ip = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&ip->sin6_addr)) v6 = numeric_host(entry->ifa_addr);
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return absl::NotFoundError("network interface \"" + name + "\" " +
                             (exists ? "has no address" : "does not exist"));
}

std::string interface_holding(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* entry = list; entry != nullptr && name.empty(); entry = entry->ifa_next) {
    if (entry->ifa_addr != nullptr && numeric_host(entry->ifa_addr) == address) {
      name = entry->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

std::string loopback_resolution(const std::string& host) {
  std::string error;
  const Addrinfo found = resolve(host, SOCK_STREAM, error);
  for (const addrinfo* entry = found.get(); entry != nullptr; entry = entry->ai_next) {
    if (is_loopback(entry->ai_addr)) return numeric_host(entry->ai_addr);
  }
  return "";
}

absl::Status check_reachable_from_other_hosts(const std::string& what, const std::string& host,
                                              const std::string& seen_from,
                                              const std::string& fix) {
  if (seen_from.empty() || !loopback_resolution(seen_from).empty()) return absl::OkStatus();
  const std::string loopback = loopback_resolution(host);
  if (loopback.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(what + " \"" + host + "\" resolves to the loopback address " +
                                    loopback + ", which no other host can reach (the worker calls from " +
                                    seen_from + "): start the worker with " + fix);
}

std::string grpc_peer_host(const std::string& peer) {
  std::string_view rest(peer);
  if (rest.starts_with("ipv4:")) {
    rest.remove_prefix(5);
  } else if (rest.starts_with("ipv6:")) {
    rest.remove_prefix(5);
  } else {
    return "";
  }
  // Peers may be percent-encoded ("ipv6:%5B::1%5D:5123").
  std::string decoded;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size()) {
      int byte = 0;
      std::from_chars(rest.data() + i + 1, rest.data() + i + 3, byte, 16);
      decoded += static_cast<char>(byte);
      i += 2;
    } else {
      decoded += rest[i];
    }
  }
  absl::StatusOr<std::pair<std::string, int>> host_port = split_host_port(decoded, "peer");
  return host_port.ok() ? host_port->first : "";
}

}  // namespace mixtrain::net
