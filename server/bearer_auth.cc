// Why: see bearer_auth.h.
#include "server/bearer_auth.h"

#include <algorithm>
#include <cctype>

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

namespace {

// Whether `value` starts with the auth scheme "Bearer " in any letter case
// (RFC 7235: schemes are case-insensitive).
bool has_bearer_scheme(std::string_view value) {
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  return true;
}

}  // namespace

grpc::Status BearerAuth::check(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    return {grpc::StatusCode::UNAUTHENTICATED, "missing 'authorization: Bearer <token>'"};
  }
  const std::string_view value(header->second.data(), header->second.size());
  if (!has_bearer_scheme(value) ||
      !constant_time_equals(value.substr(std::string_view("Bearer ").size()), token_)) {
    return {grpc::StatusCode::UNAUTHENTICATED, "invalid token"};
  }
  return grpc::Status::OK;
}

}  // namespace mixtrain::server
