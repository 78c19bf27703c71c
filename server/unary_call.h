// Why: both services check a bearer token first and answer with a gRPC
// status, never an exception or an exit; the few lines that turn a handler
// into a finished unary call live here once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "bearer_auth.h"

namespace mixtrain::server {

// absl and gRPC share the canonical status codes.
inline grpc::Status to_grpc(const absl::Status& status) {
  return {static_cast<grpc::StatusCode>(status.code()), std::string(status.message())};
}

// Finishes the call with `auth`'s verdict, or when it lets the call in,
// with what `handle` returns.
inline grpc::ServerUnaryReactor* finish_unary(grpc::CallbackServerContext* context,
                                              const BearerAuth& auth,
                                              const std::function<grpc::Status()>& handle) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = auth.check(*context);
  if (status.ok()) status = handle();
  reactor->Finish(status);
  return reactor;
}

}  // namespace mixtrain::server
