// Why: issue 29 found the worker registry unbounded and too trusting:
// lost workers stayed forever (and MixtrainWorkerLost fired forever), a
// scale-down left a LOST row, one registration could carry thousands of
// devices, ListWorkers answered everything at once, and registrations that
// never heartbeated absorbed jobs. These tests hold the bounds.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "client/workers_command.h"
#include "cluster_fixture.h"
#include "net/http_get.h"

namespace mixtrain::server {
namespace {

using net::testing_support::http_body;
using testing_support::call_context;
using testing_support::ClusterTest;
using testing_support::FakeWorker;
using testing_support::kClientToken;
using testing_support::spec;

class WorkerRegistryTest : public ClusterTest {
 protected:
  // A registration that neither heartbeats nor opens its task stream.
  grpc::Status register_only(const v1::RegisterRequest& request,
                             v1::RegisterResponse* response = nullptr) {
    v1::RegisterResponse ignored;
    return v1::WorkerService::NewStub(channel_)->Register(
        call_context(testing_support::kJoinToken).get(), request, response ? response : &ignored);
  }

  // The ids ListWorkers answers, every page of `page_size` followed.
  std::vector<std::string> listed_ids(int page_size = 0) {
    std::vector<std::string> ids;
    v1::ListWorkersRequest request;
    request.set_page_size(page_size);
    do {
      v1::ListWorkersResponse page;
      EXPECT_TRUE(jobs_->ListWorkers(call_context(kClientToken).get(), request, &page).ok());
      for (const v1::Worker& worker : page.workers()) ids.push_back(worker.id());
      request.set_page_token(page.next_page_token());
    } while (!request.page_token().empty());
    return ids;
  }

  std::string metrics() { return http_body(server_->http_port(), "/metrics"); }
};

TEST_F(WorkerRegistryTest, LostWorkersAreForgottenAfterTheRetention) {
  CoordinatorOptions bounded = options();
  bounded.lost_worker_retention = std::chrono::milliseconds(500);
  start(bounded);
  auto gone = worker();
  auto stays = worker();
  gone->stop_heartbeats();
  ASSERT_TRUE(eventually(
      [&] { return metrics().find("mixtrain_workers{state=\"lost\"} 1") != std::string::npos; }));
  ASSERT_TRUE(eventually([&] { return listed_ids().size() == 1; }));
  EXPECT_EQ(listed_ids(), std::vector<std::string>{stays->id()});
  EXPECT_NE(metrics().find("mixtrain_workers{state=\"lost\"} 0"), std::string::npos);
  // Forgotten with its credentials: coming back, it gets a new id.
  auto back = worker({.previous_worker_id = gone->id(), .previous_worker_secret = gone->secret()});
  EXPECT_NE(back->id(), gone->id());
}

TEST_F(WorkerRegistryTest, AWorkerRestartedInPlaceReplacesItsLostEntry) {
  auto before = worker({.hostname = "c1", .metrics_address = "10.0.0.7:9401"});
  auto other = worker({.hostname = "c2", .metrics_address = "10.0.0.8:9401"});
  before->stop_heartbeats();
  other->stop_heartbeats();
  ASSERT_TRUE(eventually(
      [&] { return metrics().find("mixtrain_workers{state=\"lost\"} 2") != std::string::npos; }));
  auto after = worker({.hostname = "c1", .metrics_address = "10.0.0.7:9401"});
  EXPECT_EQ(listed_ids(), (std::vector<std::string>{other->id(), after->id()}));
  EXPECT_NE(metrics().find("mixtrain_workers{state=\"lost\"} 1"), std::string::npos);
}

TEST_F(WorkerRegistryTest, ADeregisteredWorkerLeavesNoEntry) {
  auto leaving = worker();
  v1::DeregisterRequest request;
  request.set_worker_id(leaving->id());
  v1::DeregisterResponse response;
  EXPECT_EQ(leaving->stub()
                .Deregister(call_context(testing_support::kJoinToken, "not-its-secret").get(),
                            request, &response)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(listed_ids().size(), 1u);
  ASSERT_TRUE(leaving->stub().Deregister(leaving->context().get(), request, &response).ok());
  EXPECT_TRUE(listed_ids().empty());
  EXPECT_EQ(metrics().find("mixtrain_workers{state=\"lost\"} 1"), std::string::npos);
  leaving->stop_heartbeats();
}

TEST_F(WorkerRegistryTest, ListWorkersAnswersInPages) {
  std::vector<std::unique_ptr<testing_support::FakeWorker>> workers;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    workers.push_back(worker());
    ids.push_back(workers.back()->id());
  }
  v1::ListWorkersRequest request;
  request.set_page_size(2);
  v1::ListWorkersResponse first;
  ASSERT_TRUE(jobs_->ListWorkers(call_context(kClientToken).get(), request, &first).ok());
  EXPECT_EQ(first.workers_size(), 2);
  EXPECT_FALSE(first.next_page_token().empty());
  EXPECT_EQ(listed_ids(2), ids);
  EXPECT_EQ(listed_ids(), ids);
  for (const char* token : {"x", "0", "-3"}) {
    request.set_page_token(token);
    v1::ListWorkersResponse page;
    EXPECT_EQ(jobs_->ListWorkers(call_context(kClientToken).get(), request, &page).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << token;
  }
  request.set_page_token("");
  request.set_page_size(-1);
  v1::ListWorkersResponse page;
  EXPECT_EQ(jobs_->ListWorkers(call_context(kClientToken).get(), request, &page).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// `mixtrain workers` shows every worker, however many pages that takes.
TEST_F(WorkerRegistryTest, TheCliFollowsEveryPage) {
  v1::RegisterRequest request;
  request.set_hostname("many");
  for (int i = 0; i < 120; ++i) ASSERT_TRUE(register_only(request).ok());
  absl::StatusOr<cli::CoordinatorClient> client = cli::CoordinatorClient::connect(
      {.coordinator = "127.0.0.1:" + std::to_string(server_->port()), .token = kClientToken});
  ASSERT_TRUE(client.ok()) << client.status();
  std::ostringstream out, err;
  ASSERT_EQ(cli::run_workers_command(*client, cli::OutputFormat::kJson, out, err), 0) << err.str();
  EXPECT_EQ(nlohmann::json::parse(out.str()).size(), 120u);
  EXPECT_EQ(nlohmann::json::parse(out.str()).size(), listed_ids().size());
}

TEST_F(WorkerRegistryTest, ARegistrationListsAtMost64Gpus) {
  v1::RegisterRequest request;
  request.set_hostname("many");
  request.mutable_resources()->set_backend(v1::BACKEND_CUDA);
  for (int i = 0; i < 65; ++i) {
    v1::CudaDevice& device = *request.mutable_resources()->add_cuda_devices();
    device.set_index(i);
    device.set_name("NVIDIA H100 80GB HBM3");
  }
  const grpc::Status refused = register_only(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("at most 64"), std::string::npos)
      << refused.error_message();
  request.mutable_resources()->mutable_cuda_devices()->RemoveLast();
  EXPECT_TRUE(register_only(request).ok());
  request.mutable_resources()->mutable_cuda_devices(0)->set_name(std::string(257, 'x'));
  EXPECT_EQ(register_only(request).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Issue 29: a worker claiming 1 PB of RAM was given a GPT-2-XL-sized job.
// The coordinator cannot measure a worker's host, but no host has 1 PB, a
// 2 TiB GPU or 100,000 cores: such registrations are refused, naming the
// field; the largest real machines register.
TEST_F(WorkerRegistryTest, ARegistrationClaimingWhatNoMachineHasIsRefused) {
  const auto refused = [&](const v1::RegisterRequest& request, const std::string& field) {
    const grpc::Status status = register_only(request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_NE(status.error_message().find("resources." + field), std::string::npos)
        << status.error_message();
  };
  v1::RegisterRequest big;
  big.set_hostname("big");
  big.mutable_resources()->set_backend(v1::BACKEND_CUDA);
  big.mutable_resources()->set_memory_bytes(int64_t{32} << 40);  // 32 TiB: real
  big.mutable_resources()->set_cpu_cores(1920);
  v1::CudaDevice& gpu = *big.mutable_resources()->add_cuda_devices();
  gpu.set_index(0);
  gpu.set_memory_bytes(int64_t{288} << 30);  // a B300's
  EXPECT_TRUE(register_only(big).ok());

  v1::RegisterRequest petabyte = big;
  petabyte.mutable_resources()->set_memory_bytes(int64_t{1} << 50);
  refused(petabyte, "memory_bytes");
  v1::RegisterRequest huge_gpu = big;
  huge_gpu.mutable_resources()->mutable_cuda_devices(0)->set_memory_bytes(int64_t{2} << 40);
  refused(huge_gpu, "cuda_devices[0].memory_bytes");
  v1::RegisterRequest cores = big;
  cores.mutable_resources()->set_cpu_cores(100000);
  refused(cores, "cpu_cores");
  v1::RegisterRequest negative = big;
  negative.mutable_resources()->set_memory_bytes(-1);
  refused(negative, "memory_bytes");
}

// Issue 29: 40 registrations that never heartbeated, plus one real worker,
// made jobs fail ("lost (no heartbeat ...); no restarts left").
TEST_F(WorkerRegistryTest, RegistrationsThatNeverHeartbeatGetNoTask) {
  for (int i = 0; i < 3; ++i) {
    v1::RegisterRequest silent;
    silent.set_hostname("silent");
    silent.mutable_resources()->set_backend(v1::BACKEND_CPU);
    ASSERT_TRUE(register_only(silent).ok());
  }
  auto real = worker();
  ASSERT_TRUE(eventually([&] {
    const v1::ListWorkersResponse listed = list_workers();
    for (const v1::Worker& w : listed.workers())
      if (w.id() == real->id()) return w.state() == v1::WORKER_STATE_IDLE;
    return false;
  }));
  int joining = 0;
  const v1::ListWorkersResponse listed = list_workers();
  for (const v1::Worker& w : listed.workers()) joining += w.state() == v1::WORKER_STATE_JOINING;
  EXPECT_EQ(joining, 3);
  const std::string id = submit(spec(1));
  EXPECT_EQ(real->next_start().job_id(), id);
  await_state(id, v1::JOB_STATE_RUNNING);
}

// A job whose rank's worker vanished before it ever listed the task did
// not run there: it requeues without spending a restart.
TEST_F(WorkerRegistryTest, AJobLostBeforeItsRankStartedSpendsNoRestart) {
  auto black_hole = worker({.lose_starts = 1});
  const std::string id = submit(spec(1, /*max_restarts=*/0));
  await_state(id, v1::JOB_STATE_RUNNING);
  black_hole->stop_heartbeats();
  const v1::Job requeued = await_state(id, v1::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.restarts(), 0);
  const std::string cause = last_event_message(id, v1::JOB_STATE_QUEUED);
  EXPECT_NE(cause.find("before it started its task"), std::string::npos) << cause;
  EXPECT_NE(cause.find("without spending a restart"), std::string::npos) << cause;
  auto good = worker();
  const v1::Task task = good->next_start();
  EXPECT_EQ(task.job_id(), id);
  EXPECT_EQ(task.attempt(), 2);
}

// Workers on one machine (compose --scale, several agents) share its cores:
// each rank gets the host's cores over the live workers with its host id,
// at most what the worker may use, and a worker's own --threads as it is
// (issue 30: 3 workers with 2 threads each on 2 cores ran 30x slower).
TEST_F(WorkerRegistryTest, RanksOnOneHostShareItsCores) {
  std::map<std::string, int> threads;
  const auto list = [&] {
    threads.clear();
    v1::ListWorkersResponse page;
    EXPECT_TRUE(
        jobs_->ListWorkers(call_context(kClientToken).get(), v1::ListWorkersRequest(), &page).ok());
    for (const v1::Worker& listed : page.workers()) threads[listed.id()] = listed.resources().threads();
  };
  const FakeWorker::Options on_a{.cpu_cores = 2, .host_id = "boot-a", .host_cores = 2};
  auto a1 = worker(on_a);
  list();
  EXPECT_EQ(threads[a1->id()], 2);  // alone on its host
  auto a2 = worker(on_a);
  auto a3 = worker(on_a);
  list();
  for (const auto& w : {&a1, &a2, &a3}) EXPECT_EQ(threads[(*w)->id()], 1) << "2 cores, 3 workers";

  auto b1 = worker({.cpu_cores = 8, .host_id = "boot-b", .host_cores = 8});
  auto b2 = worker({.cpu_cores = 8, .host_id = "boot-b", .host_cores = 8});
  auto pinned = worker({.cpu_cores = 8, .host_id = "boot-b", .host_cores = 8, .threads = 3});
  auto quota = worker({.cpu_cores = 1, .host_id = "boot-b", .host_cores = 8});  // cpus: 1
  auto unknown = worker({.cpu_cores = 4});  // an older worker: no host id, counts alone
  list();
  EXPECT_EQ(threads[b1->id()], 2);  // 8 cores over 4 workers
  EXPECT_EQ(threads[pinned->id()], 3);
  EXPECT_EQ(threads[quota->id()], 1);
  EXPECT_EQ(threads[unknown->id()], 4);

  // A lost worker no longer shares the host.
  a3->stop_heartbeats();
  ASSERT_TRUE(eventually(
      [&] { return metrics().find("mixtrain_workers{state=\"lost\"} 1") != std::string::npos; }));
  list();
  EXPECT_EQ(threads[a1->id()], 1);
  b2->stop_heartbeats();
  pinned->stop_heartbeats();
  quota->stop_heartbeats();
  unknown->stop_heartbeats();
  a2->stop_heartbeats();
  ASSERT_TRUE(eventually(
      [&] { return metrics().find("mixtrain_workers{state=\"lost\"} 6") != std::string::npos; }));
  list();
  EXPECT_EQ(threads[b1->id()], 8);  // alone again

  // The task carries the rank's threads.
  const std::string id = submit(spec(2));
  const v1::Task first = a1->next_start();
  const v1::Task second = b1->next_start();
  EXPECT_EQ(first.job_id(), id);
  EXPECT_EQ(first.threads(), 2);
  EXPECT_EQ(second.threads(), 8);
}

}  // namespace
}  // namespace mixtrain::server
