// Why: see host_port.h.
#include "engine/common/host_port.h"

#include <charconv>

namespace mixtrain {

std::optional<HostPort> parse_host_port(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const std::string_view digits = address.substr(colon + 1);
  int port = -1;
  const auto [last, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || error != std::errc() || last != digits.data() + digits.size() ||
      port < 0 || port > 65535) {
    return std::nullopt;
  }
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return HostPort{std::string(host), port};
}

std::string join_host_port(std::string_view host, int port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

}  // namespace mixtrain
