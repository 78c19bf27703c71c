// Why: the scheduling tests each need a real coordinator on a loopback port
// with short timeouts, a job client, and fake workers; this fixture starts
// them and offers the waits the tests share (job state, condition).
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/train/train_summary.h"
#include "fake_worker.h"
#include "proto/mixtrain.grpc.pb.h"
#include "server/coordinator_server.h"
#include "test_support/temp_dir.h"

namespace mixtrain::server::testing_support {

inline constexpr char kClientToken[] = "client-token";
inline constexpr char kJoinToken[] = "join-token";

// A valid spec asking for `workers` ranks of `backend`, restarting at most
// `max_restarts` times.
inline std::string spec(int workers = 1, int max_restarts = 0, const std::string& backend = "auto",
                        const std::string& name = "t") {
  return "name: " + name + "\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2}\n" +
         "resources: {workers: " + std::to_string(workers) + ", backend: " + backend + "}\n" +
         "retries: {max_restarts: " + std::to_string(max_restarts) + "}\n";
}

// What rank `rank` of a job named "t" sends when it succeeds: its own
// summary, `ranks` holding its own entry.
inline TrainSummary rank_summary(int rank, int64_t steps = 10) {
  TrainSummary summary;
  summary.name = "t";
  summary.status = "succeeded";
  summary.steps = steps;
  summary.compute_dtype = "fp32";
  summary.ranks.push_back(RankSummary{.rank = rank, .comm_bytes_per_step = 1000 + rank});
  return summary;
}
inline std::string rank_summary_json(int rank, int64_t steps = 10) {
  return dump_json(rank_summary(rank, steps).to_json());
}

class ClusterTest : public testing::Test {
 protected:
  void SetUp() override { start(); }

  CoordinatorOptions options() {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.db_path = dir_.path("jobs.db");
    options.auth_token = kClientToken;
    options.join_token = kJoinToken;
    options.data_root = dir_.path().string();
    options.checkpoint_root = dir_.path("ckpt");
    options.worker_timeout = std::chrono::milliseconds(1000);
    return options;
  }

  // Starts (again) a coordinator on the test's database and connects to it.
  void start() { start(options()); }
  void start(const CoordinatorOptions& options) {
    server_.reset();
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel_);
  }

  // Every registered worker, as ListWorkers answers.
  v1::ListWorkersResponse list_workers() {
    v1::ListWorkersResponse workers;
    EXPECT_TRUE(jobs_->ListWorkers(call_context(kClientToken).get(), {}, &workers).ok());
    return workers;
  }

  std::unique_ptr<FakeWorker> worker(FakeWorker::Options options = {}) {
    return std::make_unique<FakeWorker>(channel_, kJoinToken, std::move(options));
  }

  // SubmitJob's status; `id` gets the job's id when it is OK.
  grpc::Status try_submit(const std::string& yaml, std::string* id = nullptr) {
    v1::SubmitJobRequest request;
    request.set_spec_yaml(yaml);
    v1::SubmitJobResponse response;
    const grpc::Status status =
        jobs_->SubmitJob(call_context(kClientToken).get(), request, &response);
    if (id != nullptr) *id = response.id();
    return status;
  }

  std::string submit(const std::string& yaml) {
    std::string id;
    const grpc::Status status = try_submit(yaml, &id);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return id;
  }

  v1::Job job(const std::string& id) {
    v1::GetJobRequest request;
    request.set_id(id);
    v1::Job job;
    const grpc::Status status = jobs_->GetJob(call_context(kClientToken).get(), request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  // True once `condition` holds, checked every 10 ms for at most `timeout`.
  static bool eventually(const std::function<bool()>& condition,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  // The job once it is in `state` (a test failure when it does not get there).
  v1::Job await_state(const std::string& id, v1::JobState state) {
    v1::Job current;
    EXPECT_TRUE(eventually([&] { return (current = job(id)).state() == state; }))
        << "job " << id << " stayed " << v1::JobState_Name(current.state()) << ": "
        << current.message();
    return current;
  }

  // The message of the job's latest event in `state` ("" when none).
  std::string last_event_message(const std::string& id, v1::JobState state) {
    std::string message;
    const v1::Job current = job(id);
    for (const v1::JobEvent& event : current.events()) {
      if (event.state() == state) message = event.message();
    }
    return message;
  }

  test_support::TempDir dir_;
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

}  // namespace mixtrain::server::testing_support
