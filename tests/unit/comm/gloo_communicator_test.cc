// Why: the Gloo communicator is what CPU data-parallel training stands on.
// The collectives run here across 2, 3 and 4 real processes over loopback
// (comm_rank_checks holds each rank's checks); a rank killed or frozen
// before an all-reduce must make the others fail within the timeout,
// naming it. Single-process tests cover one rank, argument errors, the
// rendezvous timeout and the staging-buffer accounting (two ranks as
// threads sharing a MemoryStore).
#include "engine/comm/gloo/gloo_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/make_communicator.h"
#include "engine/comm/memory_store.h"
#include "comm_test_util.h"
#include "rank_launcher.h"
#include "test_support/engine_error.h"

namespace mixtrain {
namespace {

using comm_test::make_tensor;
using comm_test::RankGroup;
using comm_test::read_floats;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::throws_invalid_argument;
using ::testing::HasSubstr;

class GlooAcrossProcesses : public ::testing::TestWithParam<int> {};

TEST_P(GlooAcrossProcesses, EveryCollectiveMatchesTheRing) {
  RankGroup group(COMM_RANK_CHECKS_PATH, "Collectives.*", GetParam(), seconds(10));
  group.expect_all_passed(seconds(90));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooAcrossProcesses, ::testing::Values(2, 3, 4));

TEST(GlooAcrossProcessesStore, RanksMeetThroughTheTcpStore) {
  RankGroup group(COMM_RANK_CHECKS_PATH, "StoreAcrossProcesses.*", 3, seconds(10));
  group.expect_all_passed(seconds(60));
}

// Rank 2 dies (or freezes) right before an all-reduce; the other ranks
// check their own errors and timing and must exit 0.
void expect_survivors_failed_cleanly(RankGroup& group, int world, milliseconds timeout) {
  std::vector<int> survivors;
  for (int rank = 0; rank < world; ++rank) {
    if (rank != 2) survivors.push_back(rank);
  }
  ASSERT_TRUE(group.wait(survivors, timeout + seconds(30))) << "survivors hang\n" << group.logs();
  for (int rank : survivors) {
    EXPECT_EQ(group.outcome(rank).exit_code, 0) << "rank " << rank << "\n" << group.logs();
  }
  std::cout << group.logs();  // the errors the survivors saw, for the record
}

// With 3 ranks both survivors are rank 2's neighbours; with 4, rank 0 is
// not and learns of rank 2 from rank 3's report.
class GlooPeerKilled : public ::testing::TestWithParam<int> {};

TEST_P(GlooPeerKilled, TheOthersFailNamingTheKilledRank) {
  const milliseconds timeout = seconds(3);
  RankGroup group(COMM_RANK_CHECKS_PATH, "PeerDeath.RanksFailNamingAPeerKilledBeforeAnAllReduce",
                  GetParam(), timeout);
  expect_survivors_failed_cleanly(group, GetParam(), timeout);
  ASSERT_TRUE(group.wait({2}, seconds(5)));
  EXPECT_EQ(group.outcome(2).signal, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooPeerKilled, ::testing::Values(3, 4));

TEST(GlooPeerFrozen, TheOthersTimeOutNamingTheFrozenRank) {
  const milliseconds timeout = seconds(2);
  RankGroup group(COMM_RANK_CHECKS_PATH, "PeerDeath.RanksTimeOutNamingAPeerThatHangs", 3, timeout);
  expect_survivors_failed_cleanly(group, 3, timeout);
}

TEST(GlooCommunicator, OneRankKeepsDataLocalAndSendsNothing) {
  MemoryStore store;
  GlooCommunicator comm(store, 0, 1);
  Tensor t = make_tensor(DType::kBF16, {1.0f, 2.0f});
  comm.all_reduce(t);
  EXPECT_EQ(read_floats(t), (std::vector<float>{1.0f, 2.0f}));
  Tensor out = make_tensor(DType::kBF16, {0.0f, 0.0f});
  comm.reduce_scatter(t, out);
  EXPECT_EQ(read_floats(out), read_floats(t));
  Tensor gathered = make_tensor(DType::kBF16, {0.0f, 0.0f});
  comm.all_gather(t, gathered);
  EXPECT_EQ(read_floats(gathered), read_floats(t));
  comm.broadcast(t, 0);
  comm.barrier();
  const CommStats stats = comm.stats();
  EXPECT_EQ(stats.total().calls, 5);
  EXPECT_EQ(stats.total().elements_sent, 0);
  EXPECT_EQ(stats.total().bytes_sent, 0);
}

TEST(GlooCommunicator, ArgumentErrorsNameTheOpAndTheTensors) {
  MemoryStore store;
  GlooCommunicator comm(store, 0, 1);
  Tensor f32 = make_tensor(DType::kF32, {1, 2, 3, 4});
  Tensor two = make_tensor(DType::kF32, {0, 0});
  Tensor ints = comm_test::cpu().empty({4}, DType::kI32, MemoryCategory::kCommBuffers);
  EXPECT_TRUE(throws_invalid_argument([&] { comm.all_reduce(ints); }, {"all_reduce", "int32"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { comm.all_reduce(Tensor()); }, {"all_reduce", "undefined"}));
  EXPECT_TRUE(throws_invalid_argument([&] { comm.reduce_scatter(f32, two); },
                                      {"reduce_scatter", "fp32(4)", "fp32(2)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { comm.all_gather(f32, two); },
                                      {"all_gather", "fp32(2)", "fp32(4)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { comm.broadcast(f32, 1); }, {"broadcast", "root 1"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { GlooCommunicator(store, 2, 2); }, {"rank 2", "world of 2"}));
  EXPECT_EQ(comm.stats().total().calls, 0) << "nothing was queued";
}

TEST(GlooCommunicator, RendezvousTimesOutNamingTheMissingRank) {
  MemoryStore store;
  try {
    GlooCommunicator comm(store, 0, 2, comm_test::options_with(milliseconds(300)));
    ADD_FAILURE() << "connected without rank 1";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("rank 0 of 2"));
    EXPECT_THAT(e.what(), HasSubstr("'comm/gloo/1'"));
  }
}

TEST(GlooCommunicator, AnAddressThisHostDoesNotHaveFailsNamingIt) {
  MemoryStore store;
  CommOptions options = comm_test::options_with(milliseconds(300));
  options.hostname = "192.0.2.1";  // TEST-NET-1: on no interface here
  try {
    GlooCommunicator comm(store, 0, 2, options);
    ADD_FAILURE() << "bound an address of another host";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("gloo rendezvous (rank 0 of 2 at 192.0.2.1)"));
    EXPECT_THAT(e.what(), HasSubstr("cannot bind 192.0.2.1"));
  }
}

TEST(GlooCommunicator, AFailedConnectNamesWhereThePeersSaidTheyAre) {
  MemoryStore store;
  // Rank 1 published its address, then vanished before the mesh formed.
  store.set("comm/peer/1", "127.0.0.1 pid 4711");
  try {
    GlooCommunicator comm(store, 0, 2, comm_test::options_with(milliseconds(300)));
    ADD_FAILURE() << "connected without rank 1";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("gloo rendezvous (rank 0 of 2 at 127.0.0.1)"));
    EXPECT_THAT(e.what(), HasSubstr("(peers: rank 1 at 127.0.0.1 pid 4711)"));
  }
}

TEST(GlooCommunicator, StagingBuffersAreCountedAsCommBuffersAndAsyncOpsQueue) {
  MemoryStore store;
  auto rank = [&](int r) {
    auto memory = std::make_shared<MemoryTracker>();
    GlooCommunicator comm(store, r, 2, comm_test::options_with(seconds(10), memory));
    Tensor four = make_tensor(DType::kF32, {1, 2, 3, 4});
    EXPECT_TRUE(
        throws_invalid_argument([&] { comm.reduce_scatter(four, four.view(1, {2})); },
                                {"reduce_scatter", "overlaps", "chunk " + std::to_string(r)}));
    Tensor t = make_tensor(DType::kF32, std::vector<float>(1000, static_cast<float>(r + 1)));
    CommHandle handle = comm.all_reduce_async(t);
    handle.wait();
    handle.wait();  // waiting twice is fine
    EXPECT_EQ(read_floats(t), std::vector<float>(1000, 3.0f));
    // Reduce-scatter stages two 500-element fp32 chunks.
    return memory->current(MemoryPool::kDevice, MemoryCategory::kCommBuffers);
  };
  auto other = std::async(std::launch::async, rank, 1);
  EXPECT_EQ(rank(0), 4000u);
  EXPECT_EQ(other.get(), 4000u);
}

// An event that happens when the test says so, as a GPU's compute stream
// would reach the point where a collective's inputs are written.
class GateEvent : public Event {
 public:
  void wait() const override { opened_.wait(); }
  void open() { gate_.set_value(); }

 private:
  std::promise<void> gate_;
  std::shared_future<void> opened_ = gate_.get_future().share();
};

TEST(GlooCommunicator, AnOpWaitsForItsReadyEventAndTheQueueBehindIt) {
  MemoryStore store;
  GlooCommunicator comm(store, 0, 1);
  auto gate = std::make_shared<GateEvent>();
  Tensor t = make_tensor(DType::kF32, {1.0f, 2.0f});
  const CommHandle gated = comm.all_reduce_async(t, ReduceOp::kSum, gate);
  const CommHandle behind = comm.all_gather_async(t, make_tensor(DType::kF32, {0.0f, 0.0f}));
  // Held back while the event has not happened, and so is the op queued behind it.
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(gated.done());
  EXPECT_FALSE(behind.done());
  gate->open();
  gated.wait();
  behind.wait();
  EXPECT_EQ(comm.stats().total().calls, 2);
}

TEST(MakeCommunicator, PicksTheBackendByNameAndRejectsUnknownOnes) {
  EXPECT_STREQ(default_comm_backend(DeviceType::kCpu), "gloo");
  EXPECT_STREQ(default_comm_backend(DeviceType::kCuda), "nccl");
  MemoryStore store;
  auto comm = make_communicator("gloo", store, 0, 1);
  EXPECT_STREQ(comm->backend_name(), "gloo");
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_TRUE(throws_invalid_argument([&] { make_communicator("mpi", store, 0, 1); },
                                      {"unknown backend 'mpi'"}));
#ifndef MIXTRAIN_WITH_NCCL
  try {
    make_communicator("nccl", store, 0, 1);
    ADD_FAILURE() << "made an nccl communicator in a build without NCCL";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
#endif
}

}  // namespace
}  // namespace mixtrain
