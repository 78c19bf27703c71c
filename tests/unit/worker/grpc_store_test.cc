// Why: ranks scheduled by the coordinator rendezvous through GrpcStore;
// these tests run it against a real gRPC server: values round-trip, a get
// waits for a later set, timeouts and non-integer adds fail with the
// engine's error codes, a coordinator that is down at first (a restart
// during rendezvous) is waited for, and Gloo ranks really form a group
// over it.
#include "worker/grpc_store.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "engine/comm/make_communicator.h"
#include "engine/common/error.h"
#include "test_worker_service.h"

namespace mixtrain::worker {
namespace {

using std::chrono::milliseconds;

class GrpcStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    connection_ = connect(server_.address());
  }

  static std::unique_ptr<WorkerConnection> connect(const std::string& address) {
    ConnectionOptions options;
    options.address = address;
    options.join_token = "join";
    absl::StatusOr<std::unique_ptr<WorkerConnection>> connection = WorkerConnection::open(options);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return std::move(*connection);
  }

  testing::TestWorkerService service_;
  testing::TestServer server_{service_};
  std::unique_ptr<WorkerConnection> connection_;
};

TEST_F(GrpcStoreTest, SetThenGetAndScopesAreSeparate) {
  GrpcStore a(*connection_, "job1/1");
  GrpcStore b(*connection_, "job1/2");
  a.set("addr/0", std::string("\x00\x01zz", 4));
  EXPECT_EQ(a.get("addr/0", milliseconds(1000)), std::string("\x00\x01zz", 4));
  EXPECT_THROW(b.get("addr/0", milliseconds(200)), EngineError);
}

TEST_F(GrpcStoreTest, GetWaitsForALaterSet) {
  GrpcStore store(*connection_, "s");
  std::future<std::string> value =
      std::async(std::launch::async, [&] { return store.get("late", milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(200));
  GrpcStore(*connection_, "s").set("late", "v");
  EXPECT_EQ(value.get(), "v");
  store.wait({"late"}, milliseconds(1000));
}

TEST_F(GrpcStoreTest, TimeoutIsUnavailableNamingTheKey) {
  GrpcStore store(*connection_, "s");
  try {
    store.get("missing-key", milliseconds(300));
    FAIL() << "expected a timeout";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("missing-key"), std::string::npos) << e.what();
  }
  try {
    store.wait({"other-key"}, milliseconds(300));
    FAIL() << "expected a timeout";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("other-key"), std::string::npos) << e.what();
  }
}

TEST_F(GrpcStoreTest, AddCountsAndRefusesNonIntegers) {
  GrpcStore store(*connection_, "s");
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
  store.set("text", "abc");
  try {
    store.add("text", 1);
    FAIL() << "expected INVALID_ARGUMENT";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST_F(GrpcStoreTest, AnAddWhoseAnswerWasLostIsRetriedWithoutAddingTwice) {
  GrpcStore store(*connection_, "s");
  service_.lose_add_answers(2);
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
}

TEST_F(GrpcStoreTest, CoordinatorDownAtFirstIsWaitedFor) {
  const int port = server_.port();
  server_.stop();
  GrpcStore store(*connection_, "s", milliseconds(10000));
  std::future<void> setter = std::async(std::launch::async, [&] { store.set("k", "v"); });
  std::this_thread::sleep_for(milliseconds(700));
  ASSERT_TRUE(server_.start(port));
  setter.get();
  EXPECT_EQ(store.get("k", milliseconds(5000)), "v");
}

TEST_F(GrpcStoreTest, UnreachableForTheWholeTimeoutIsUnavailable) {
  server_.stop();
  GrpcStore store(*connection_, "s", milliseconds(500));
  try {
    store.set("k", "v");
    FAIL() << "expected UNAVAILABLE";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
}

TEST_F(GrpcStoreTest, GlooRanksFormAGroupOverIt) {
  constexpr int kWorld = 2;
  std::vector<std::future<int64_t>> barriers;
  for (int rank = 0; rank < kWorld; ++rank) {
    barriers.push_back(std::async(std::launch::async, [&, rank] {
      GrpcStore store(*connection_, "job/attempt-1");
      CommOptions options;
      options.timeout = std::chrono::seconds(20);
      std::unique_ptr<Communicator> comm =
          make_communicator(default_comm_backend(DeviceType::kCpu), store, rank, kWorld, options);
      comm->barrier();
      return comm->stats()[CommOp::kBarrier].calls;
    }));
  }
  for (auto& calls : barriers) EXPECT_EQ(calls.get(), 1);
}

}  // namespace
}  // namespace mixtrain::worker
