// Why: the WorkerService of mixtrain.proto, through which worker agents
// register, receive their tasks, heartbeat, report progress and logs, and
// rendezvous. Every call needs the join token (never the clients' token);
// Store gets and waits finish from the rendezvous store's callbacks, so
// many ranks can wait at once without holding a gRPC thread each.
#pragma once

#include <utility>

#include "server/bearer_auth.h"
#include "proto/mixtrain.grpc.pb.h"
#include "server/rendezvous_store.h"
#include "server/scheduler.h"
#include "server/task_outbox.h"

namespace mixtrain::server {

// Longest Store wait honoured; longer timeouts are cut to this.
inline constexpr std::chrono::hours kMaxStoreWait{24};
// Most GPUs a worker may register: a real host has at most a few dozen.
inline constexpr int kMaxDevicesPerWorker = 64;
// The most a registration may claim: twice the largest machines sold
// (32 TiB of RAM, 288 GB on one GPU, a few thousand CPUs). The coordinator
// cannot measure a worker's host; it can refuse a claim no host makes
// (issue 29: a worker claiming 1 PB was given a GPT-2-XL job).
inline constexpr int64_t kMaxWorkerMemoryBytes = int64_t{64} << 40;
inline constexpr int64_t kMaxGpuMemoryBytes = int64_t{1} << 40;
inline constexpr int kMaxWorkerCpus = 8192;

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // Every pointer must outlive the service.
  WorkerServiceImpl(Scheduler* scheduler, TaskOutbox* outbox, RendezvousStore* rendezvous,
                    BearerAuth join_auth)
      : scheduler_(scheduler),
        outbox_(outbox),
        rendezvous_(rendezvous),
        auth_(std::move(join_auth)) {}

  // A worker id (previous_worker_id when given) and the heartbeat interval;
  // INVALID_ARGUMENT for a data or metrics address that resolves to
  // loopback while the worker calls from another host, for more than
  // kMaxDevicesPerWorker GPUs, or for resources beyond the kMax* bounds.
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  // The worker's commands, until it opens another stream or the server stops.
  grpc::ServerWriteReactor<v1::TaskCommand>* Tasks(grpc::CallbackServerContext* context,
                                                   const v1::TasksRequest* request) override;
  // OK with reregister=true for an unknown worker.
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  // OK once the worker is forgotten; NOT_FOUND / PERMISSION_DENIED as
  // every call naming a worker.
  grpc::ServerUnaryReactor* Deregister(grpc::CallbackServerContext* context,
                                       const v1::DeregisterRequest* request,
                                       v1::DeregisterResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const v1::ReportProgressRequest* request,
                                           v1::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* ReportLog(grpc::CallbackServerContext* context,
                                      const v1::ReportLogRequest* request,
                                      v1::ReportLogResponse* response) override;
  grpc::ServerUnaryReactor* StoreSet(grpc::CallbackServerContext* context,
                                     const v1::StoreSetRequest* request,
                                     v1::StoreSetResponse* response) override;
  // DEADLINE_EXCEEDED naming the key when it is not set within timeout_ms.
  grpc::ServerUnaryReactor* StoreGet(grpc::CallbackServerContext* context,
                                     const v1::StoreGetRequest* request,
                                     v1::StoreGetResponse* response) override;
  // DEADLINE_EXCEEDED naming the first key not set within timeout_ms.
  grpc::ServerUnaryReactor* StoreWait(grpc::CallbackServerContext* context,
                                      const v1::StoreWaitRequest* request,
                                      v1::StoreWaitResponse* response) override;
  // INVALID_ARGUMENT when the key holds a non-integer.
  grpc::ServerUnaryReactor* StoreAdd(grpc::CallbackServerContext* context,
                                     const v1::StoreAddRequest* request,
                                     v1::StoreAddResponse* response) override;

 private:
  Scheduler* const scheduler_;
  TaskOutbox* const outbox_;
  RendezvousStore* const rendezvous_;
  const BearerAuth auth_;
};

}  // namespace mixtrain::server
