// Why: both services check a bearer token and the request's bounds first
// and answer with a gRPC status, never an exception or an exit; the few
// lines that admit a call and turn a handler into a finished unary call
// live here once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

#include <absl/status/status.h>
#include "server/bearer_auth.h"
#include "server/error_text.h"
#include "server/request_bounds.h"

namespace mixtrain::server {

// absl and gRPC share the canonical status codes.
inline grpc::Status to_grpc(const absl::Status& status) {
  return {static_cast<grpc::StatusCode>(status.code()), std::string(status.message())};
}

// `auth`'s verdict on the call, then whether `request` is within bounds.
inline grpc::Status admit(const grpc::CallbackServerContext& context, const BearerAuth& auth,
                          const google::protobuf::Message& request) {
  grpc::Status status = auth.check(context);
  return status.ok() ? to_grpc(check_request_bounds(request)) : status;
}

// Finishes the call with admit's verdict, or when it lets the call in,
// with what `handle` returns (its message bounded: error_text.h).
inline grpc::ServerUnaryReactor* finish_unary(grpc::CallbackServerContext* context,
                                              const BearerAuth& auth,
                                              const google::protobuf::Message& request,
                                              const std::function<grpc::Status()>& handle) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = admit(*context, auth, request);
  if (status.ok()) status = handle();
  reactor->Finish(bounded_status(status));
  return reactor;
}

}  // namespace mixtrain::server
