// Why: the scheduler is only observable through what workers receive and
// report, so tests drive it with this stand-in agent over real gRPC: it
// registers, reads its Tasks stream on a thread, heartbeats the tasks it
// "runs" (started and neither reported ended nor cancelled), and reports
// progress, outcomes and logs when a test says so.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/synchronization/mutex.h>
#include "proto/mixtrain.grpc.pb.h"
#include "proto/running_task.h"
#include "proto/worker_secret.h"

namespace mixtrain::server::testing_support {

// A context with a 10 s deadline, "authorization: Bearer <token>" unless
// empty and the worker secret unless empty.
inline std::unique_ptr<grpc::ClientContext> call_context(const std::string& token,
                                                        const std::string& worker_secret = "") {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  if (!worker_secret.empty()) context->AddMetadata(v1::kWorkerSecretHeader, worker_secret);
  return context;
}

class FakeWorker {
 public:
  struct Options {
    v1::Backend backend = v1::BACKEND_CPU;
    std::string previous_worker_id;        // reconnecting after a coordinator restart
    std::string previous_worker_secret;    // ... presenting this secret
    std::vector<v1::RunningTask> running;  // ... still running these
    // A cancelled task is still listed in heartbeats this long (stopping).
    std::chrono::milliseconds cancel_takes{0};
    // This many starts are lost on the way: neither recorded nor run.
    int lose_starts = 0;
    std::string hostname = "host";
    std::string metrics_address;
    int64_t memory_bytes = 0;  // RAM it registers; 0: unknown
    int cpu_cores = 2;         // the cores it may use
    std::string host_id;       // the machine under it (boot id); empty: unknown
    int host_cores = 0;        // that machine's cores; 0: unknown
    int threads = 0;           // its own --threads; 0: sized by the coordinator
    std::vector<v1::CudaDevice> cuda_devices;  // with BACKEND_CUDA: it trains on the first
  };

  // Registers, opens the Tasks stream and starts heartbeating.
  FakeWorker(std::shared_ptr<grpc::Channel> channel, std::string join_token, Options options)
      : stub_(v1::WorkerService::NewStub(std::move(channel))), token_(std::move(join_token)) {
    v1::RegisterRequest request;
    request.set_hostname(options.hostname);
    request.set_metrics_address(options.metrics_address);
    request.mutable_resources()->set_backend(options.backend);
    request.mutable_resources()->set_cpu_cores(options.cpu_cores);
    request.mutable_resources()->set_host_id(options.host_id);
    request.mutable_resources()->set_host_cores(options.host_cores);
    request.mutable_resources()->set_threads(options.threads);
    request.mutable_resources()->set_memory_bytes(options.memory_bytes);
    for (const v1::CudaDevice& device : options.cuda_devices)
      *request.mutable_resources()->add_cuda_devices() = device;
    request.set_previous_worker_id(options.previous_worker_id);
    request.set_previous_worker_secret(options.previous_worker_secret);
    for (const v1::RunningTask& task : options.running) *request.add_running() = task;
    running_ = options.running;
    cancel_takes_ = options.cancel_takes;
    lose_starts_ = options.lose_starts;
    v1::RegisterResponse response;
    const grpc::Status status = stub_->Register(call_context(token_).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    id_ = response.worker_id();
    secret_ = response.worker_secret();
    interval_ms_ = response.heartbeat_interval_ms();
    open_stream();
    heartbeat_thread_ = std::thread([this] { heartbeat_loop(); });
  }
  ~FakeWorker() {
    stop_heartbeats();
    close_stream();
  }

  const std::string& id() const { return id_; }
  const std::string& secret() const { return secret_; }
  int heartbeat_interval_ms() const { return interval_ms_; }
  v1::WorkerService::Stub& stub() { return *stub_; }
  // A context carrying the join token and this worker's secret.
  std::unique_ptr<grpc::ClientContext> context() const { return call_context(token_, secret_); }

  // Ends the Tasks stream and opens another, as an agent reconnecting does.
  void reopen_stream() {
    close_stream();
    open_stream();
  }

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

  // Reports `outcome` of `task` (its progress with step = `step`, and
  // `eval_batches_done` of 100 batches of an evaluation under way when set).
  grpc::Status report(const v1::Task& task, v1::TaskOutcome outcome,
                      const std::string& message = "", const std::string& summary_json = "",
                      int64_t step = 0, int64_t eval_batches_done = 0) {
    v1::ReportProgressRequest request;
    request.set_worker_id(id_);
    *request.mutable_task() = v1::running_of(task);
    request.mutable_progress()->set_step(step);
    request.mutable_progress()->set_steps(10);
    request.mutable_progress()->set_train_loss(2.5);
    if (eval_batches_done > 0) {
      request.mutable_progress()->set_eval_batches_done(eval_batches_done);
      request.mutable_progress()->set_eval_batches(100);
    }
    request.set_outcome(outcome);
    request.set_message(message);
    request.set_summary_json(summary_json);
    if (outcome != v1::TASK_OUTCOME_RUNNING) {
      absl::MutexLock lock(&mu_);
      reported_final_.emplace(task.job_id(), task.attempt());
    }
    v1::ReportProgressResponse response;
    const grpc::Status status = stub_->ReportProgress(context().get(), request, &response);
    // As the agent does: a final outcome stays in the heartbeats until the
    // coordinator took it, or a heartbeat in between reports the task gone
    // without an outcome (a flake this once had).
    if (outcome != v1::TASK_OUTCOME_RUNNING && status.ok()) forget(task.job_id(), task.attempt());
    return status;
  }

  grpc::Status log(const v1::Task& task, const std::vector<std::string>& lines) {
    v1::ReportLogRequest request;
    request.set_worker_id(id_);
    *request.mutable_task() = v1::running_of(task);
    for (const std::string& line : lines) request.add_lines(line);
    v1::ReportLogResponse response;
    return stub_->ReportLog(context().get(), request, &response);
  }

  // Stops heartbeating, as a hung or unplugged machine would.
  void stop_heartbeats() {
    stop_.store(true);
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  }

 private:
  void open_stream() {
    tasks_context_ = std::make_unique<grpc::ClientContext>();
    tasks_context_->AddMetadata("authorization", "Bearer " + token_);
    tasks_context_->AddMetadata(v1::kWorkerSecretHeader, secret_);
    reader_thread_ = std::thread([this, context = tasks_context_.get()] { read_tasks(context); });
  }

  void close_stream() {
    tasks_context_->TryCancel();
    reader_thread_.join();
  }

  void read_tasks(grpc::ClientContext* context) {
    v1::TasksRequest request;
    request.set_worker_id(id_);
    std::unique_ptr<grpc::ClientReader<v1::TaskCommand>> reader = stub_->Tasks(context, request);
    v1::TaskCommand command;
    while (reader->Read(&command)) {
      absl::MutexLock lock(&mu_);
      if (command.has_start()) {
        if (lose_starts_ > 0) {
          --lose_starts_;
          continue;
        }
        // A repeated start of a task it runs changes nothing, as in the agent.
        const v1::RunningTask started = v1::running_of(command.start());
        if (std::any_of(running_.begin(), running_.end(), [&](const v1::RunningTask& task) {
              return v1::same_task(task, started);
            })) {
          continue;
        }
        running_.push_back(started);
      }
      if (command.has_cancel() && reported_final_.contains(std::make_pair(
                                      command.cancel().job_id(), command.cancel().attempt()))) {
        // The coordinator took the outcome but a heartbeat still listed the
        // task: as the agent, ignore the cancel of a task that ended here.
        continue;
      }
      if (command.has_cancel()) {
        const auto stopped_at = std::chrono::steady_clock::now() + cancel_takes_;
        for (const v1::RunningTask& task : running_) {
          if (task.job_id() == command.cancel().job_id() &&
              task.attempt() == command.cancel().attempt()) {
            stopping_.emplace_back(task, stopped_at);
          }
        }
      }
      commands_.push_back(command);
    }
    reader->Finish().IgnoreError();
  }

  // Forgets the cancelled tasks whose stopping time came.
  void finish_stopping() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [task, at] : stopping_) {
      if (at > now) continue;
      std::erase_if(running_, [&](const v1::RunningTask& t) { return v1::same_task(t, task); });
    }
    std::erase_if(stopping_, [&](const auto& entry) { return entry.second <= now; });
  }

  void heartbeat_loop() {
    while (!stop_.load()) {
      v1::HeartbeatRequest request;
      request.set_worker_id(id_);
      {
        absl::MutexLock lock(&mu_);
        finish_stopping();
        for (const v1::RunningTask& task : running_) *request.add_running() = task;
      }
      v1::HeartbeatResponse response;
      stub_->Heartbeat(context().get(), request, &response).IgnoreError();
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
  std::string secret_;
  int interval_ms_ = 200;
  std::chrono::milliseconds cancel_takes_{0};
  std::unique_ptr<grpc::ClientContext> tasks_context_;
  absl::Mutex mu_;
  std::deque<v1::TaskCommand> commands_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RunningTask> running_ ABSL_GUARDED_BY(mu_);
  // (job, attempt) of every final outcome reported.
  std::set<std::pair<std::string, int32_t>> reported_final_ ABSL_GUARDED_BY(mu_);
  // Cancelled tasks still listed until their time.
  std::vector<std::pair<v1::RunningTask, std::chrono::steady_clock::time_point>> stopping_
      ABSL_GUARDED_BY(mu_);
  int lose_starts_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::thread reader_thread_;
  std::thread heartbeat_thread_;
};

}  // namespace mixtrain::server::testing_support
