// Why: see worker_service.h.
#include "worker_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "queued_writer.h"
#include "unary_call.h"

namespace mixtrain::server {
namespace {

std::chrono::milliseconds store_timeout(int64_t timeout_ms) {
  return std::clamp(std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(0),
                    std::chrono::milliseconds(kMaxStoreWait));
}

// Starts a Store wait finished later by the rendezvous store: `on_value`
// receives the value on success.
grpc::ServerUnaryReactor* finish_later(grpc::CallbackServerContext* context, const BearerAuth& auth,
                                       const std::function<void(RendezvousStore::Done)>& start,
                                       std::function<void(const std::string&)> on_value) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status status = auth.check(*context); !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  start([reactor, on_value = std::move(on_value)](absl::StatusOr<std::string> value) {
    if (value.ok()) on_value(*value);
    reactor->Finish(value.ok() ? grpc::Status::OK : to_grpc(value.status()));
  });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return finish_unary(context, auth_, [&] {
    *response = scheduler_->register_worker(*request);
    return grpc::Status::OK;
  });
}

grpc::ServerWriteReactor<v1::TaskCommand>* WorkerServiceImpl::Tasks(
    grpc::CallbackServerContext* context, const v1::TasksRequest* request) {
  grpc::Status status = auth_.check(*context);
  if (status.ok()) status = to_grpc(scheduler_->check_worker(request->worker_id()));
  if (!status.ok()) return new RefusedWriter<v1::TaskCommand>(status);
  return outbox_->open(request->worker_id());
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return finish_unary(context, auth_, [&] {
    *response = scheduler_->heartbeat(*request);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportProgress(
    grpc::CallbackServerContext* context, const v1::ReportProgressRequest* request,
    v1::ReportProgressResponse*) {
  return finish_unary(context, auth_,
                      [&] { return to_grpc(scheduler_->report_progress(*request)); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportLog(grpc::CallbackServerContext* context,
                                                       const v1::ReportLogRequest* request,
                                                       v1::ReportLogResponse*) {
  return finish_unary(context, auth_, [&] { return to_grpc(scheduler_->report_log(*request)); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreSet(grpc::CallbackServerContext* context,
                                                      const v1::StoreSetRequest* request,
                                                      v1::StoreSetResponse*) {
  return finish_unary(context, auth_, [&] {
    rendezvous_->set(request->scope(), request->key(), request->value());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreGet(grpc::CallbackServerContext* context,
                                                      const v1::StoreGetRequest* request,
                                                      v1::StoreGetResponse* response) {
  return finish_later(
      context, auth_,
      [&](RendezvousStore::Done done) {
        rendezvous_->get(request->scope(), request->key(), store_timeout(request->timeout_ms()),
                         std::move(done));
      },
      [response](const std::string& value) { response->set_value(value); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreWait(grpc::CallbackServerContext* context,
                                                       const v1::StoreWaitRequest* request,
                                                       v1::StoreWaitResponse*) {
  return finish_later(
      context, auth_,
      [&](RendezvousStore::Done done) {
        rendezvous_->wait(request->scope(), {request->keys().begin(), request->keys().end()},
                          store_timeout(request->timeout_ms()), std::move(done));
      },
      [](const std::string&) {});
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreAdd(grpc::CallbackServerContext* context,
                                                      const v1::StoreAddRequest* request,
                                                      v1::StoreAddResponse* response) {
  return finish_unary(context, auth_, [&] {
    const absl::StatusOr<int64_t> sum =
        rendezvous_->add(request->scope(), request->key(), request->delta());
    if (!sum.ok()) return to_grpc(sum.status());
    response->set_value(*sum);
    return grpc::Status::OK;
  });
}

}  // namespace mixtrain::server
