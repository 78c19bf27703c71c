// Why: the scheduler is only observable through what workers receive and
// report, so tests drive it with this stand-in agent over real gRPC: it
// registers, reads its Tasks stream on a thread, heartbeats the tasks it
// "runs" (started and neither reported ended nor cancelled), and reports
// progress, outcomes and logs when a test says so.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "mixtrain.grpc.pb.h"

namespace mixtrain::server::testing_support {

// A context with a 10 s deadline and "authorization: Bearer <token>" unless empty.
inline std::unique_ptr<grpc::ClientContext> call_context(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

class FakeWorker {
 public:
  struct Options {
    v1::Backend backend = v1::BACKEND_CPU;
    std::string previous_worker_id;        // reconnecting after a coordinator restart
    std::vector<v1::RunningTask> running;  // ... still running these
    std::string hostname = "host";
    std::string metrics_address;
  };

  // Registers, opens the Tasks stream and starts heartbeating.
  FakeWorker(std::shared_ptr<grpc::Channel> channel, std::string join_token, Options options)
      : stub_(v1::WorkerService::NewStub(std::move(channel))), token_(std::move(join_token)) {
    v1::RegisterRequest request;
    request.set_hostname(options.hostname);
    request.set_metrics_address(options.metrics_address);
    request.mutable_resources()->set_backend(options.backend);
    request.mutable_resources()->set_cpu_cores(2);
    request.set_previous_worker_id(options.previous_worker_id);
    for (const v1::RunningTask& task : options.running) *request.add_running() = task;
    running_ = options.running;
    v1::RegisterResponse response;
    const grpc::Status status = stub_->Register(call_context(token_).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    id_ = response.worker_id();
    interval_ms_ = response.heartbeat_interval_ms();
    reader_thread_ = std::thread([this] { read_tasks(); });
    heartbeat_thread_ = std::thread([this] { heartbeat_loop(); });
  }
  ~FakeWorker() {
    stop_heartbeats();
    tasks_context_.TryCancel();
    reader_thread_.join();
  }

  const std::string& id() const { return id_; }
  int heartbeat_interval_ms() const { return interval_ms_; }
  v1::WorkerService::Stub& stub() { return *stub_; }

  // The next command received within `timeout`, or nullopt.
  std::optional<v1::TaskCommand> next(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::deque<v1::TaskCommand>* q) { return !q->empty(); }, &commands_),
        absl::FromChrono(timeout));
    if (commands_.empty()) return std::nullopt;
    v1::TaskCommand command = commands_.front();
    commands_.pop_front();
    return command;
  }

  // The next command, which must be a start.
  v1::Task next_start() {
    const std::optional<v1::TaskCommand> command = next();
    EXPECT_TRUE(command.has_value() && command->has_start())
        << id_ << ": " << (command ? command->DebugString() : "no command");
    return command && command->has_start() ? command->start() : v1::Task();
  }

  // Reports `outcome` of `task` (its progress with step = `step`).
  grpc::Status report(const v1::Task& task, v1::TaskOutcome outcome,
                      const std::string& message = "", const std::string& summary_json = "",
                      int64_t step = 0) {
    v1::ReportProgressRequest request;
    request.set_worker_id(id_);
    *request.mutable_task() = running_task(task);
    request.mutable_progress()->set_step(step);
    request.mutable_progress()->set_steps(10);
    request.mutable_progress()->set_train_loss(2.5);
    request.set_outcome(outcome);
    request.set_message(message);
    request.set_summary_json(summary_json);
    if (outcome != v1::TASK_OUTCOME_RUNNING) forget(task.job_id(), task.attempt());
    v1::ReportProgressResponse response;
    return stub_->ReportProgress(call_context(token_).get(), request, &response);
  }

  grpc::Status log(const v1::Task& task, const std::vector<std::string>& lines) {
    v1::ReportLogRequest request;
    request.set_worker_id(id_);
    *request.mutable_task() = running_task(task);
    for (const std::string& line : lines) request.add_lines(line);
    v1::ReportLogResponse response;
    return stub_->ReportLog(call_context(token_).get(), request, &response);
  }

  // Stops heartbeating, as a hung or unplugged machine would.
  void stop_heartbeats() {
    stop_.store(true);
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  }

  static v1::RunningTask running_task(const v1::Task& task) {
    v1::RunningTask running;
    running.set_job_id(task.job_id());
    running.set_attempt(task.attempt());
    running.set_rank(task.rank());
    return running;
  }

 private:
  void read_tasks() {
    v1::TasksRequest request;
    request.set_worker_id(id_);
    tasks_context_.AddMetadata("authorization", "Bearer " + token_);
    std::unique_ptr<grpc::ClientReader<v1::TaskCommand>> reader =
        stub_->Tasks(&tasks_context_, request);
    v1::TaskCommand command;
    while (reader->Read(&command)) {
      absl::MutexLock lock(&mu_);
      if (command.has_start()) running_.push_back(running_task(command.start()));
      if (command.has_cancel()) {
        std::erase_if(running_, [&](const v1::RunningTask& task) {
          return task.job_id() == command.cancel().job_id() &&
                 task.attempt() == command.cancel().attempt();
        });
      }
      commands_.push_back(command);
    }
    reader->Finish().IgnoreError();
  }

  void heartbeat_loop() {
    while (!stop_.load()) {
      v1::HeartbeatRequest request;
      request.set_worker_id(id_);
      {
        absl::MutexLock lock(&mu_);
        for (const v1::RunningTask& task : running_) *request.add_running() = task;
      }
      v1::HeartbeatResponse response;
      stub_->Heartbeat(call_context(token_).get(), request, &response).IgnoreError();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max(interval_ms_ / 2, 20)));
    }
  }

  void forget(const std::string& job_id, int32_t attempt) {
    absl::MutexLock lock(&mu_);
    std::erase_if(running_, [&](const v1::RunningTask& task) {
      return task.job_id() == job_id && task.attempt() == attempt;
    });
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const std::string token_;
  std::string id_;
  int interval_ms_ = 200;
  grpc::ClientContext tasks_context_;
  absl::Mutex mu_;
  std::deque<v1::TaskCommand> commands_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RunningTask> running_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread reader_thread_;
  std::thread heartbeat_thread_;
};

}  // namespace mixtrain::server::testing_support
