// Why: every JobService call needs the coordinator's bearer token (issue 5,
// Security); one check, comparing in constant time so that response timing
// does not reveal how much of a guessed token was right.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <string_view>
#include <utility>

namespace mixtrain::server {

class BearerAuth {
 public:
  // An empty `token` lets every call in (a coordinator started without one).
  explicit BearerAuth(std::string token) : token_(std::move(token)) {}

  // OK when the call carries "authorization: Bearer <token>" (the scheme
  // in any letter case, RFC 7235), else UNAUTHENTICATED (without saying
  // what was expected).
  grpc::Status check(const grpc::ServerContextBase& context) const;

 private:
  const std::string token_;
};

// a == b, in time that depends only on their lengths.
bool constant_time_equals(std::string_view a, std::string_view b);

}  // namespace mixtrain::server
