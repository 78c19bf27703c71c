// Why: the agent and its gRPC clients (GrpcStore, Reporter) are tested
// against a real gRPC server on a loopback port, one that can be stopped
// and started again on the same port like a restarting coordinator (and
// forget its workers as one does). It implements the WorkerService side
// the agent needs with the least logic that keeps the contract of
// mixtrain.proto: ids from a counter, commands from a queue the test
// fills, the rendezvous store over a map (adds idempotent by request id),
// and reports recorded.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/mixtrain.grpc.pb.h"

namespace mixtrain::worker::testing {

class TestWorkerService final : public v1::WorkerService::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    std::lock_guard lock(mu_);
    registrations_.push_back(*request);
    refuse_credentials_ = false;
    known_worker_ = "w" + std::to_string(++next_id_);
    response->set_worker_id(known_worker_);
    response->set_heartbeat_interval_ms(200);
    return grpc::Status::OK;
  }

  grpc::Status Tasks(grpc::ServerContext* context, const v1::TasksRequest* request,
                     grpc::ServerWriter<v1::TaskCommand>* writer) override {
    std::unique_lock lock(mu_);
    if (request->worker_id() != known_worker_)
      return {grpc::StatusCode::NOT_FOUND, "unknown worker " + request->worker_id()};
    while (!context->IsCancelled()) {
      if (commands_.empty()) {
        changed_.wait_for(lock, std::chrono::milliseconds(50));
        continue;
      }
      const v1::TaskCommand command = commands_.front();
      commands_.erase(commands_.begin());
      if (!writer->Write(command)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    std::lock_guard lock(mu_);
    if (refuse_credentials_) {
      return {grpc::StatusCode::PERMISSION_DENIED,
              "wrong credentials for worker '" + request->worker_id() + "'"};
    }
    if (request->worker_id() != known_worker_) {
      response->set_reregister(true);
      return grpc::Status::OK;
    }
    heartbeats_.push_back(*request);
    return grpc::Status::OK;
  }

  grpc::Status Deregister(grpc::ServerContext*, const v1::DeregisterRequest* request,
                          v1::DeregisterResponse*) override {
    std::lock_guard lock(mu_);
    deregistered_.push_back(request->worker_id());
    return grpc::Status::OK;
  }

  // Until the next registration, heartbeats answer PERMISSION_DENIED (the
  // worker's id is held under other credentials).
  void refuse_credentials() {
    std::lock_guard lock(mu_);
    refuse_credentials_ = true;
  }
  // The worker ids deregistered so far.
  std::vector<std::string> deregistered() {
    std::lock_guard lock(mu_);
    return deregistered_;
  }

  // Writes `command` to the next (or the open) task stream.
  void send(const v1::TaskCommand& command) {
    std::lock_guard lock(mu_);
    commands_.push_back(command);
    changed_.notify_all();
  }

  // What a restarted coordinator knows of its workers: nothing.
  void forget_workers() {
    std::lock_guard lock(mu_);
    known_worker_.clear();
  }

  std::vector<v1::RegisterRequest> registrations() {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  std::vector<v1::HeartbeatRequest> heartbeats() {
    std::lock_guard lock(mu_);
    return heartbeats_;
  }

  grpc::Status StoreSet(grpc::ServerContext*, const v1::StoreSetRequest* request,
                        v1::StoreSetResponse*) override {
    std::lock_guard lock(mu_);
    store_[request->scope() + "/" + request->key()] = request->value();
    changed_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status StoreGet(grpc::ServerContext*, const v1::StoreGetRequest* request,
                        v1::StoreGetResponse* response) override {
    std::unique_lock lock(mu_);
    const std::string key = request->scope() + "/" + request->key();
    if (!changed_.wait_for(lock, std::chrono::milliseconds(request->timeout_ms()),
                           [&] { return store_.contains(key); }))
      return {grpc::StatusCode::DEADLINE_EXCEEDED, "key " + request->key() + " was not set"};
    response->set_value(store_[key]);
    return grpc::Status::OK;
  }

  grpc::Status StoreWait(grpc::ServerContext*, const v1::StoreWaitRequest* request,
                         v1::StoreWaitResponse*) override {
    std::unique_lock lock(mu_);
    for (const std::string& key : request->keys()) {
      if (!changed_.wait_for(lock, std::chrono::milliseconds(request->timeout_ms()),
                             [&] { return store_.contains(request->scope() + "/" + key); }))
        return {grpc::StatusCode::DEADLINE_EXCEEDED, "key " + key + " was not set"};
    }
    return grpc::Status::OK;
  }

  grpc::Status StoreAdd(grpc::ServerContext*, const v1::StoreAddRequest* request,
                        v1::StoreAddResponse* response) override {
    std::lock_guard lock(mu_);
    if (const auto seen = adds_.find(request->request_id());
        !request->request_id().empty() && seen != adds_.end()) {
      response->set_value(seen->second);
      return grpc::Status::OK;
    }
    std::string& value = store_[request->scope() + "/" + request->key()];
    int64_t current = 0;
    try {
      size_t used = 0;
      current = value.empty() ? 0 : std::stoll(value, &used);
      if (!value.empty() && used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "key " + request->key() + " is no integer"};
    }
    value = std::to_string(current + request->delta());
    response->set_value(current + request->delta());
    if (!request->request_id().empty()) adds_[request->request_id()] = response->value();
    changed_.notify_all();
    if (lose_add_answers_ > 0) {
      --lose_add_answers_;
      return {grpc::StatusCode::UNAVAILABLE, "the answer was lost"};
    }
    return grpc::Status::OK;
  }

  // The next `count` adds are applied but answer UNAVAILABLE, as when the
  // answer is lost on the way back.
  void lose_add_answers(int count) {
    std::lock_guard lock(mu_);
    lose_add_answers_ = count;
  }

  grpc::Status ReportProgress(grpc::ServerContext*, const v1::ReportProgressRequest* request,
                              v1::ReportProgressResponse*) override {
    {
      std::lock_guard lock(mu_);
      if (refuse_finals_ && request->outcome() != v1::TASK_OUTCOME_RUNNING) {
        ++refused_finals_;
        return {grpc::StatusCode::UNAVAILABLE, "final reports are refused for now"};
      }
    }
    return record(*request, progress_);
  }

  // While set, final reports answer UNAVAILABLE (a coordinator that cannot
  // be reached for them, as when they queue behind slow calls).
  void refuse_finals(bool refuse) {
    std::lock_guard lock(mu_);
    refuse_finals_ = refuse;
  }
  int refused_finals() {
    std::lock_guard lock(mu_);
    return refused_finals_;
  }

  grpc::Status ReportLog(grpc::ServerContext*, const v1::ReportLogRequest* request,
                         v1::ReportLogResponse*) override {
    return record(*request, logs_);
  }

  // Reports from another worker id answer NOT_FOUND.
  void set_known_worker(const std::string& id) {
    std::lock_guard lock(mu_);
    known_worker_ = id;
  }

  std::vector<v1::ReportProgressRequest> progress() {
    std::lock_guard lock(mu_);
    return progress_;
  }
  std::vector<v1::ReportLogRequest> logs() {
    std::lock_guard lock(mu_);
    return logs_;
  }

  // Waits up to `timeout` for a final (not RUNNING) progress report.
  bool wait_for_final(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] {
      for (const auto& p : progress_)
        if (p.outcome() != v1::TASK_OUTCOME_RUNNING) return true;
      return false;
    });
  }

 private:
  // Keeps a report of the known worker; NOT_FOUND for any other.
  template <typename Request>
  grpc::Status record(const Request& request, std::vector<Request>& into) {
    std::lock_guard lock(mu_);
    if (request.worker_id() != known_worker_)
      return {grpc::StatusCode::NOT_FOUND, "unknown worker " + request.worker_id()};
    into.push_back(request);
    changed_.notify_all();
    return grpc::Status::OK;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> store_;
  std::string known_worker_ = "w1";
  int next_id_ = 0;
  std::vector<v1::TaskCommand> commands_;
  std::vector<v1::RegisterRequest> registrations_;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::ReportProgressRequest> progress_;
  std::vector<v1::ReportLogRequest> logs_;
  std::map<std::string, int64_t> adds_;  // request id -> its sum
  int lose_add_answers_ = 0;
  bool refuse_finals_ = false;
  bool refuse_credentials_ = false;
  std::vector<std::string> deregistered_;
  int refused_finals_ = 0;
};

// The service on 127.0.0.1:`port` (0: a free one); stop() and start() again
// on port() to play a coordinator restart (the service keeps its state).
class TestServer {
 public:
  explicit TestServer(TestWorkerService& service) : service_(service) {}
  ~TestServer() { stop(); }

  bool start(int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    return server_ != nullptr && port_ > 0;
  }
  void stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  TestWorkerService& service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace mixtrain::worker::testing
