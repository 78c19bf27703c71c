// Why: see worker_service.h.
#include "server/worker_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "net/net_address.h"
#include "proto/worker_secret.h"
#include "server/queued_writer.h"
#include "server/summary_merge.h"
#include "server/unary_call.h"

namespace mixtrain::server {
namespace {

std::chrono::milliseconds store_timeout(int64_t timeout_ms) {
  return std::clamp(std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(0),
                    std::chrono::milliseconds(kMaxStoreWait));
}

// Starts a Store wait finished later by the rendezvous store: `on_value`
// receives the value on success.
grpc::ServerUnaryReactor* finish_later(grpc::CallbackServerContext* context, const BearerAuth& auth,
                                       const google::protobuf::Message& request,
                                       const std::function<absl::Status()>& check_access,
                                       const std::function<void(RendezvousStore::Done)>& start,
                                       std::function<void(const std::string&)> on_value) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = admit(*context, auth, request);
  if (status.ok()) status = to_grpc(check_access());
  if (!status.ok()) {
    reactor->Finish(bounded_status(status));
    return reactor;
  }
  start([reactor, on_value = std::move(on_value)](absl::StatusOr<std::string> value) {
    if (value.ok()) on_value(*value);
    reactor->Finish(value.ok() ? grpc::Status::OK : bounded_status(to_grpc(value.status())));
  });
  return reactor;
}

// OK with `answer` in `response`, or the error `answer` holds.
template <typename Response>
grpc::Status answer_with(absl::StatusOr<Response> answer, Response* response) {
  if (!answer.ok()) return to_grpc(answer.status());
  *response = std::move(*answer);
  return grpc::Status::OK;
}

// The worker secret the call presents ("" when none).
std::string worker_secret(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(v1::kWorkerSecretHeader);
  return found == metadata.end() ? "" : std::string(found->second.data(), found->second.size());
}

// Fills in an empty data address with the caller's and refuses addresses
// that resolve to loopback when the worker calls from another host: its
// peers (or Prometheus) would connect to their own host instead.
grpc::Status check_addresses(const std::string& peer, v1::RegisterRequest& request) {
  const std::string caller = net::grpc_peer_host(peer);
  if (request.data_address().empty()) request.set_data_address(caller);
  absl::Status status = net::check_reachable_from_other_hosts(
      "the data address", request.data_address(), caller, net::kDataAddressFix);
  if (!status.ok() || request.metrics_address().empty()) return to_grpc(status);
  const absl::StatusOr<std::pair<std::string, int>> metrics =
      net::split_host_port(request.metrics_address(), "metrics address");
  if (!metrics.ok()) return to_grpc(metrics.status());
  return to_grpc(net::check_reachable_from_other_hosts("the metrics address host", metrics->first,
                                                       caller, net::kMetricsAddressFix));
}

// INVALID_ARGUMENT naming the first claim of `resources` no machine makes.
grpc::Status check_resources(const v1::Resources& resources) {
  const auto refuse = [](const std::string& field, int64_t value, int64_t bound) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "resources." + field + " is " + std::to_string(value) +
                            "; a worker may register at most " + std::to_string(bound));
  };
  if (resources.cuda_devices_size() > kMaxDevicesPerWorker) {
    return refuse("cuda_devices (GPUs)", resources.cuda_devices_size(), kMaxDevicesPerWorker);
  }
  if (resources.memory_bytes() < 0 || resources.memory_bytes() > kMaxWorkerMemoryBytes) {
    return refuse("memory_bytes", resources.memory_bytes(), kMaxWorkerMemoryBytes);
  }
  for (const v1::CudaDevice& device : resources.cuda_devices()) {
    if (device.memory_bytes() < 0 || device.memory_bytes() > kMaxGpuMemoryBytes) {
      return refuse("cuda_devices[" + std::to_string(device.index()) + "].memory_bytes",
                    device.memory_bytes(), kMaxGpuMemoryBytes);
    }
  }
  for (const auto& [field, value] :
       {std::pair{"cpu_cores", resources.cpu_cores()}, {"host_cores", resources.host_cores()},
        {"threads", resources.threads()}}) {
    if (value < 0 || value > kMaxWorkerCpus) return refuse(field, value, kMaxWorkerCpus);
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return finish_unary(context, auth_, *request, [&] {
    v1::RegisterRequest checked = *request;
    if (grpc::Status status = check_resources(checked.resources()); !status.ok()) return status;
    if (grpc::Status status = check_addresses(context->peer(), checked); !status.ok()) {
      return status;
    }
    return answer_with(scheduler_->register_worker(checked), response);
  });
}

grpc::ServerWriteReactor<v1::TaskCommand>* WorkerServiceImpl::Tasks(
    grpc::CallbackServerContext* context, const v1::TasksRequest* request) {
  grpc::Status status = admit(*context, auth_, *request);
  if (status.ok()) {
    status = to_grpc(scheduler_->open_task_stream(request->worker_id(), worker_secret(*context)));
  }
  if (!status.ok()) return new RefusedWriter<v1::TaskCommand>(status);
  return outbox_->open(request->worker_id());
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return finish_unary(context, auth_, *request, [&] {
    return answer_with(scheduler_->heartbeat(*request, worker_secret(*context)), response);
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Deregister(grpc::CallbackServerContext* context,
                                                        const v1::DeregisterRequest* request,
                                                        v1::DeregisterResponse*) {
  return finish_unary(context, auth_, *request, [&] {
    return to_grpc(scheduler_->deregister_worker(request->worker_id(), worker_secret(*context)));
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportProgress(
    grpc::CallbackServerContext* context, const v1::ReportProgressRequest* request,
    v1::ReportProgressResponse* response) {
  return finish_unary(context, auth_, *request, [&] {
    // Nothing a worker sent is parsed before it proved who it is.
    const std::string secret = worker_secret(*context);
    if (absl::Status known = scheduler_->check_worker(request->worker_id(), secret); !known.ok()) {
      return to_grpc(known);
    }
    absl::StatusOr<ReportedSummary> summary = read_reported_summary(request->summary_json());
    if (!summary.ok()) return to_grpc(summary.status());
    return answer_with(scheduler_->report_progress(*request, secret, std::move(*summary)),
                       response);
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportLog(grpc::CallbackServerContext* context,
                                                       const v1::ReportLogRequest* request,
                                                       v1::ReportLogResponse*) {
  return finish_unary(context, auth_, *request, [&] {
    return to_grpc(scheduler_->report_log(*request, worker_secret(*context)));
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreSet(grpc::CallbackServerContext* context,
                                                      const v1::StoreSetRequest* request,
                                                      v1::StoreSetResponse*) {
  return finish_unary(context, auth_, *request, [&] {
    absl::Status status = scheduler_->check_store_access(
        request->worker_id(), worker_secret(*context), request->scope());
    if (status.ok()) status = rendezvous_->set(request->scope(), request->key(), request->value());
    return to_grpc(status);
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreGet(grpc::CallbackServerContext* context,
                                                      const v1::StoreGetRequest* request,
                                                      v1::StoreGetResponse* response) {
  return finish_later(
      context, auth_, *request,
      [&] {
        return scheduler_->check_store_access(request->worker_id(), worker_secret(*context),
                                              request->scope());
      },
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
      context, auth_, *request,
      [&] {
        return scheduler_->check_store_access(request->worker_id(), worker_secret(*context),
                                              request->scope());
      },
      [&](RendezvousStore::Done done) {
        rendezvous_->wait(request->scope(), {request->keys().begin(), request->keys().end()},
                          store_timeout(request->timeout_ms()), std::move(done));
      },
      [](const std::string&) {});
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreAdd(grpc::CallbackServerContext* context,
                                                      const v1::StoreAddRequest* request,
                                                      v1::StoreAddResponse* response) {
  return finish_unary(context, auth_, *request, [&] {
    const absl::Status access = scheduler_->check_store_access(
        request->worker_id(), worker_secret(*context), request->scope());
    if (!access.ok()) return to_grpc(access);
    const absl::StatusOr<int64_t> sum = rendezvous_->add(request->scope(), request->key(),
                                                         request->delta(), request->request_id());
    if (!sum.ok()) return to_grpc(sum.status());
    response->set_value(*sum);
    return grpc::Status::OK;
  });
}

}  // namespace mixtrain::server
