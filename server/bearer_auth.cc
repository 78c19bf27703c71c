// Why: see bearer_auth.h.
#include "bearer_auth.h"

#include <algorithm>

namespace mixtrain::server {

bool constant_time_equals(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    difference |= x ^ y;
  }
  return difference == 0;
}

grpc::Status BearerAuth::check(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status::OK;
  constexpr std::string_view kPrefix = "Bearer ";
  const auto& metadata = context.client_metadata();
  const auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    return {grpc::StatusCode::UNAUTHENTICATED, "missing 'authorization: Bearer <token>'"};
  }
  const std::string_view value(header->second.data(), header->second.size());
  if (!value.starts_with(kPrefix) || !constant_time_equals(value.substr(kPrefix.size()), token_)) {
    return {grpc::StatusCode::UNAUTHENTICATED, "invalid token"};
  }
  return grpc::Status::OK;
}

}  // namespace mixtrain::server
