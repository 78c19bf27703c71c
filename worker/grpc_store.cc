// Why: see grpc_store.h.
#include "worker/grpc_store.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "net/backoff.h"
#include "engine/common/error.h"

namespace mixtrain::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long past a server-side wait the call's own deadline lies, so that
// the server's DEADLINE_EXCEEDED (naming the key) arrives first.
constexpr milliseconds kDeadlineMargin{5000};
// The deadline of a call that waits for nothing on the server.
constexpr milliseconds kCallTimeout{10000};

// Runs `attempt(remaining)` until it returns anything but UNAVAILABLE (the
// coordinator is away) or NOT_FOUND (it restarted and does not know this
// worker until its agent registered again) or `deadline` passes, sleeping
// with backoff in between; returns the last status.
template <typename Attempt>
grpc::Status retry_unavailable(Clock::time_point deadline, Attempt attempt) {
  net::Backoff backoff;
  while (true) {
    const auto remaining = std::max(
        milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    grpc::Status status = attempt(remaining);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::NOT_FOUND) {
      return status;
    }
    const milliseconds delay = backoff.next().value();
    if (Clock::now() + delay >= deadline) return status;
    std::this_thread::sleep_for(delay);
  }
}

// Throws the EngineError a failed store call stands for.
[[noreturn]] void throw_store_error(const grpc::Status& status, const std::string& what) {
  const std::string message = "rendezvous store: " + what + ": " + status.error_message() +
                              " (gRPC code " +
                              std::to_string(static_cast<int>(status.error_code())) + ")";
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      throw EngineError(ErrorCode::kInvalidArgument, message);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw EngineError(ErrorCode::kUnavailable, message);
    default:
      throw EngineError(ErrorCode::kInternal, message);
  }
}

}  // namespace

void GrpcStore::set(const std::string& key, std::string_view value) {
  v1::StoreSetRequest request;
  request.set_worker_id(worker_id_);
  request.set_scope(scope_);
  request.set_key(key);
  request.set_value(std::string(value));
  const grpc::Status status = retry_unavailable(Clock::now() + retry_window_, [&](milliseconds) {
    grpc::ClientContext context;
    connection_.prepare(context, kCallTimeout);
    v1::StoreSetResponse response;
    return connection_.stub().StoreSet(&context, request, &response);
  });
  if (!status.ok()) throw_store_error(status, "set " + key);
}

std::string GrpcStore::get(const std::string& key, milliseconds timeout) {
  v1::StoreGetRequest request;
  request.set_worker_id(worker_id_);
  request.set_scope(scope_);
  request.set_key(key);
  v1::StoreGetResponse response;
  const grpc::Status status =
      retry_unavailable(Clock::now() + timeout, [&](milliseconds remaining) {
        request.set_timeout_ms(remaining.count());
        grpc::ClientContext context;
        connection_.prepare(context, remaining + kDeadlineMargin);
        return connection_.stub().StoreGet(&context, request, &response);
      });
  if (!status.ok()) throw_store_error(status, "get " + key);
  return response.value();
}

void GrpcStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  v1::StoreWaitRequest request;
  request.set_worker_id(worker_id_);
  request.set_scope(scope_);
  for (const std::string& key : keys) request.add_keys(key);
  const grpc::Status status =
      retry_unavailable(Clock::now() + timeout, [&](milliseconds remaining) {
        request.set_timeout_ms(remaining.count());
        grpc::ClientContext context;
        connection_.prepare(context, remaining + kDeadlineMargin);
        v1::StoreWaitResponse response;
        return connection_.stub().StoreWait(&context, request, &response);
      });
  if (!status.ok())
    throw_store_error(status, "wait for " + std::to_string(keys.size()) + " key(s)");
}

int64_t GrpcStore::add(const std::string& key, int64_t delta) {
  v1::StoreAddRequest request;
  request.set_worker_id(worker_id_);
  request.set_scope(scope_);
  request.set_key(key);
  request.set_delta(delta);
  // The same id on every retry: the coordinator answers a repeat with the
  // first sum instead of adding again.
  request.set_request_id(worker_id_ + "/" + std::to_string(::getpid()) + "/" +
                         std::to_string(next_add_++));
  v1::StoreAddResponse response;
  const grpc::Status status = retry_unavailable(Clock::now() + retry_window_, [&](milliseconds) {
    grpc::ClientContext context;
    connection_.prepare(context, kCallTimeout);
    return connection_.stub().StoreAdd(&context, request, &response);
  });
  if (!status.ok()) throw_store_error(status, "add " + key);
  return response.value();
}

}  // namespace mixtrain::worker
