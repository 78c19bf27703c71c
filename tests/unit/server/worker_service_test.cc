// Why: ranks rendezvous through the coordinator's Store while others set
// keys, so gets and waits must block without starving the server (8 ranks
// waiting at once), time out naming the missing key, and Add must refuse a
// non-integer, and a retried Add must add once. Only a worker holding a
// rank of the running attempt, proven by its secret, may use its scope; an
// ended attempt's scope cannot be re-created; a worker's id cannot be taken
// over without its secret. The two tokens must never open each other's
// service, and a refused call must change nothing.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "cluster_fixture.h"

namespace mixtrain::server {
namespace {

using testing_support::call_context;
using testing_support::ClusterTest;
using testing_support::kClientToken;
using testing_support::kJoinToken;
using testing_support::spec;

// The calls of one rank: a worker holding rank 0 of a running 1-worker
// job, in that attempt's scope.
class StoreTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    stub_ = v1::WorkerService::NewStub(channel_);
    rank_ = worker();
    job_id_ = submit(spec(1));
    task_ = rank_->next_start();
    scope_ = task_.rendezvous_scope();
  }
  grpc::Status set(const std::string& key, const std::string& value) {
    v1::StoreSetRequest request;
    request.set_worker_id(rank_->id());
    request.set_scope(scope_);
    request.set_key(key);
    request.set_value(value);
    v1::StoreSetResponse response;
    return stub_->StoreSet(rank_->context().get(), request, &response);
  }
  grpc::Status get(const std::string& key, int64_t timeout_ms, std::string* value = nullptr) {
    v1::StoreGetRequest request;
    request.set_worker_id(rank_->id());
    request.set_scope(scope_);
    request.set_key(key);
    request.set_timeout_ms(timeout_ms);
    v1::StoreGetResponse response;
    grpc::Status status = stub_->StoreGet(rank_->context().get(), request, &response);
    if (value != nullptr) *value = response.value();
    return status;
  }
  grpc::Status wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
    v1::StoreWaitRequest request;
    request.set_worker_id(rank_->id());
    request.set_scope(scope_);
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_ms(timeout_ms);
    v1::StoreWaitResponse response;
    return stub_->StoreWait(rank_->context().get(), request, &response);
  }
  grpc::Status add(const std::string& key, int64_t delta, int64_t* value,
                   const std::string& request_id = "") {
    v1::StoreAddRequest request;
    request.set_worker_id(rank_->id());
    request.set_scope(scope_);
    request.set_key(key);
    request.set_delta(delta);
    request.set_request_id(request_id);
    v1::StoreAddResponse response;
    grpc::Status status = stub_->StoreAdd(rank_->context().get(), request, &response);
    *value = response.value();
    return status;
  }
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<testing_support::FakeWorker> rank_;
  std::string job_id_;
  v1::Task task_;
  std::string scope_;
};

TEST_F(StoreTest, SetGetWaitAndAdd) {
  ASSERT_TRUE(set("addr0", std::string("a\0b", 3)).ok());
  std::string value;
  ASSERT_TRUE(get("addr0", 0, &value).ok());
  EXPECT_EQ(value, std::string("a\0b", 3));
  EXPECT_TRUE(wait({"addr0"}, 0).ok());
  int64_t sum = 0;
  ASSERT_TRUE(add("count", 2, &sum).ok());
  EXPECT_EQ(sum, 2);
  ASSERT_TRUE(add("count", 3, &sum).ok());
  EXPECT_EQ(sum, 5);
  ASSERT_TRUE(get("count", 0, &value).ok());
  EXPECT_EQ(value, "5");
  const grpc::Status not_integer = add("addr0", 1, &sum);
  EXPECT_EQ(not_integer.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(not_integer.error_message().find("addr0"), std::string::npos);
}

TEST_F(StoreTest, GetAndWaitTimeOutNamingTheMissingKey) {
  const auto begin = std::chrono::steady_clock::now();
  const grpc::Status missing = get("nope", 200);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(190));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(missing.error_message().find("'nope'"), std::string::npos) << missing.error_message();
  ASSERT_TRUE(set("a", "1").ok());
  const grpc::Status waited = wait({"a", "b", "c"}, 100);
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(waited.error_message().find("'b'"), std::string::npos) << waited.error_message();
}

TEST_F(StoreTest, GetReturnsOnceAnotherRankSets) {
  std::future<grpc::Status> waiting =
      std::async(std::launch::async, [&] { return get("late", 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(set("late", "v").ok());
  EXPECT_TRUE(waiting.get().ok());
}

TEST_F(StoreTest, EightRanksWaitAtOnceWhileTheyEachSetTheirKey) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < 8; ++rank) keys.push_back("rank" + std::to_string(rank));
  std::vector<std::future<grpc::Status>> ranks;
  for (int rank = 0; rank < 8; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      // Every rank waits for all keys first; a blocked gRPC thread per
      // waiter would deadlock the sets below on a small thread pool.
      std::future<grpc::Status> waiting =
          std::async(std::launch::async, [&] { return wait(keys, 8000); });
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * rank));
      const grpc::Status s = set(keys[rank], "x");
      if (!s.ok()) return s;
      return waiting.get();
    }));
  }
  for (auto& rank : ranks) {
    const grpc::Status status = rank.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
}

TEST_F(StoreTest, WaitersEndWhenTheCoordinatorShutsDown) {
  std::future<grpc::Status> waiting =
      std::async(std::launch::async, [&] { return get("never", 60'000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto begin = std::chrono::steady_clock::now();
  server_->shutdown();
  EXPECT_NE(waiting.get().error_code(), grpc::StatusCode::OK);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
}

TEST_F(StoreTest, AnAddRetriedWithItsRequestIdAddsOnce) {
  int64_t sum = 0;
  ASSERT_TRUE(add("count", 2, &sum, "r1").ok());
  ASSERT_TRUE(add("count", 2, &sum, "r1").ok());  // the answer was lost: retried
  EXPECT_EQ(sum, 2);
  ASSERT_TRUE(add("count", 3, &sum, "r2").ok());
  EXPECT_EQ(sum, 5);
}

TEST_F(StoreTest, AScopeHoldsWhatItsWorldSizeNeedsAndNoMore) {
  const ScopeLimits limits = scope_limits(1);
  const std::string mebibyte(1 << 20, 'v');
  const size_t fitting = limits.bytes / (mebibyte.size() + 8);  // keys "big/NNN" are short
  for (size_t i = 0; i < fitting; ++i) {
    ASSERT_TRUE(set("big/" + std::to_string(100 + i), mebibyte).ok()) << i;
  }
  const grpc::Status refused = set("big/999", mebibyte);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("scope '" + scope_ + "' holds"), std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find(std::to_string(limits.bytes)), std::string::npos);
  // Replacing a key with a value of its size needs no room; what was stored stays.
  EXPECT_TRUE(set("big/100", mebibyte).ok());
  std::string value;
  ASSERT_TRUE(get("big/100", 0, &value).ok());
  EXPECT_EQ(value.size(), mebibyte.size());
  EXPECT_EQ(get("big/999", 0).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // Replacing values with shorter ones frees their bytes.
  for (size_t i = 0; i < fitting; ++i) ASSERT_TRUE(set("big/" + std::to_string(100 + i), "").ok());
  EXPECT_TRUE(set("big/999", mebibyte).ok());
  ASSERT_TRUE(set("big/999", "").ok());

  // Entries are counted too: small keys, and the request ids adds remember.
  int64_t sum = 0;
  size_t entries = fitting + 1;
  for (; entries + 1 < limits.entries; ++entries) {
    ASSERT_TRUE(set("small/" + std::to_string(entries), "x").ok()) << entries;
  }
  ASSERT_TRUE(add("count", 1, &sum).ok());  // the last entry: a key without a request id
  const grpc::Status full = add("count", 1, &sum, "r1");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("at most " + std::to_string(limits.entries)),
            std::string::npos)
      << full.error_message();
  EXPECT_EQ(set("small/extra", "x").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(add("count", 1, &sum).ok());  // no new entry: still served
  EXPECT_EQ(sum, 2);
}

TEST_F(StoreTest, OnlyAWorkerHoldingARankOfTheAttemptMayUseItsScope) {
  auto other = worker();  // registered, idle: holds no rank of the job
  v1::StoreSetRequest request;
  request.set_worker_id(other->id());
  request.set_scope(scope_);
  request.set_key("comm/gloo/0");
  request.set_value("10.0.0.66:1");  // a redirect of rank 0's peers
  v1::StoreSetResponse response;
  const grpc::Status foreign = stub_->StoreSet(other->context().get(), request, &response);
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::PERMISSION_DENIED) << foreign.error_message();
  // Naming the rank's worker without its secret (the join token alone).
  request.set_worker_id(rank_->id());
  const grpc::Status impostor = stub_->StoreSet(other->context().get(), request, &response);
  EXPECT_EQ(impostor.error_code(), grpc::StatusCode::PERMISSION_DENIED) << impostor.error_message();
  const grpc::Status no_secret =
      stub_->StoreSet(call_context(kJoinToken).get(), request, &response);
  EXPECT_EQ(no_secret.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  std::string value;
  EXPECT_EQ(get("comm/gloo/0", 0, &value).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The rank itself may.
  EXPECT_TRUE(set("comm/gloo/0", "10.0.0.2:1").ok());
}

TEST_F(StoreTest, AStaleRankCannotRecreateTheScopeOfAnEndedAttempt) {
  ASSERT_TRUE(set("k", "v").ok());
  v1::CancelJobRequest cancel;
  cancel.set_id(job_id_);
  v1::Job cancelled;
  ASSERT_TRUE(jobs_->CancelJob(call_context(kClientToken).get(), cancel, &cancelled).ok());
  // The worker still holds the task until it stops it, but the scope is gone.
  const grpc::Status late = set("k", "v2");
  EXPECT_TRUE(late.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
              late.error_code() == grpc::StatusCode::PERMISSION_DENIED)
      << late.error_code() << " " << late.error_message();
  EXPECT_NE(get("k", 0).error_code(), grpc::StatusCode::OK);
}

TEST_F(StoreTest, ARegistrationReusingALiveWorkersIdNeedsItsSecret) {
  v1::RegisterRequest request;
  request.set_hostname("impostor");
  request.set_previous_worker_id(rank_->id());
  v1::RegisterResponse response;
  const grpc::Status taken = stub_->Register(call_context(kJoinToken).get(), request, &response);
  EXPECT_EQ(taken.error_code(), grpc::StatusCode::PERMISSION_DENIED) << taken.error_message();
  request.set_previous_worker_secret("guess");
  EXPECT_EQ(stub_->Register(call_context(kJoinToken).get(), request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // The worker's entry and its rank are untouched; with its secret it may re-register.
  request.set_previous_worker_secret(rank_->secret());
  *request.add_running() = v1::running_of(task_);
  ASSERT_TRUE(stub_->Register(call_context(kJoinToken).get(), request, &response).ok());
  EXPECT_EQ(response.worker_id(), rank_->id());
  EXPECT_EQ(response.worker_secret(), rank_->secret());
  EXPECT_TRUE(set("still", "mine").ok());
}

using AuthTest = ClusterTest;

TEST_F(AuthTest, EachServiceTakesOnlyItsOwnToken) {
  auto workers = v1::WorkerService::NewStub(channel_);
  for (const std::string& token : {std::string(), std::string("wrong"), std::string(kClientToken),
                                   std::string(kJoinToken) + "x"}) {
    v1::RegisterRequest request;
    request.set_hostname("intruder");
    v1::RegisterResponse response;
    EXPECT_EQ(workers->Register(call_context(token).get(), request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
    v1::StoreSetRequest set;
    set.set_scope("s");
    set.set_key("k");
    v1::StoreSetResponse set_response;
    EXPECT_EQ(workers->StoreSet(call_context(token).get(), set, &set_response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  for (const std::string& token : {std::string(), std::string(kJoinToken)}) {
    v1::SubmitJobRequest submit;
    submit.set_spec_yaml(spec());
    v1::SubmitJobResponse submitted;
    EXPECT_EQ(jobs_->SubmitJob(call_context(token).get(), submit, &submitted).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
    v1::WatchJobRequest watch;
    watch.set_id("x");
    auto context = call_context(token);
    auto reader = jobs_->WatchJob(context.get(), watch);
    v1::JobUpdate update;
    EXPECT_FALSE(reader->Read(&update));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Nothing changed: no job, no worker, no key.
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(jobs_->ListWorkers(call_context(kClientToken).get(), {}, &listed).ok());
  EXPECT_EQ(listed.workers_size(), 0);
  EXPECT_TRUE(server_->database().list_jobs()->empty());  // so no scope was ever opened
}

TEST_F(AuthTest, EqualTokensAreRefused) {
  CoordinatorOptions same = options();
  same.join_token = same.auth_token;
  EXPECT_EQ(CoordinatorServer::start(same).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mixtrain::server
