// Why: one rank of a multi-process comm test (started by rank_launcher.h,
// never by ctest directly). Each test here is one scenario that every rank
// runs in lockstep against real loopback sockets: the ranks meet through
// the launcher's TcpStoreServer, build a GlooCommunicator, and check
// results against exact values or the ring's per-hop rounding, and the
// sent-element counters against the ring formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "engine/common/error.h"
#include "rank_environment.h"

namespace mixtrain::comm_test {
namespace {

using ::testing::HasSubstr;

constexpr DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// Rank r's small-integer input: sums of these are exact in every dtype.
std::vector<float> integers(int r, int64_t n) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>((i * 7 + r * 3) % 11) - 5;
  return values;
}

std::vector<float> integer_sum(int64_t n) {
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < world(); ++r) {
    const std::vector<float> x = integers(r, n);
    for (int64_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  return sum;
}

// integers(0, n), integers(1, n), ... one after the other: what an
// all-gather of them gives.
std::vector<float> every_ranks_integers(int64_t n) {
  std::vector<float> all;
  for (int r = 0; r < world(); ++r) {
    const std::vector<float> x = integers(r, n);
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

Tensor zeros(DType dtype, int64_t n) { return make_tensor(dtype, std::vector<float>(n, 0.0f)); }

// Runs `collective` and checks that it counted one `op` that sent
// `elements` of element_bytes each.
template <class F>
void expect_sends(CommOp op, int64_t elements, size_t element_bytes, F&& collective) {
  const CommStats before = comm().stats();
  collective();
  const CommOpStats delta = comm().stats().since(before)[op];
  EXPECT_EQ(delta.calls, 1) << comm_op_name(op);
  EXPECT_EQ(delta.elements_sent, elements) << comm_op_name(op);
  EXPECT_EQ(delta.bytes_sent, elements * static_cast<int64_t>(element_bytes)) << comm_op_name(op);
  EXPECT_GE(delta.seconds, 0.0);
}

TEST(Collectives, AllReduceSumOfIntegersIsExactAndSendsTheRingCount) {
  const int64_t n = 120 * world();
  for (DType dtype : kFloatTypes) {
    Tensor t = make_tensor(dtype, integers(rank(), n));
    expect_sends(CommOp::kAllReduce, 2 * n * (world() - 1) / world(), dtype_size(dtype),
                 [&] { comm().all_reduce(t); });
    EXPECT_EQ(read_floats(t), integer_sum(n)) << dtype_name(dtype);
  }
}

TEST(Collectives, AllReduceOf16BitTypesRoundsAfterEveryHopInRingOrder) {
  const int64_t n = 1001;  // not divisible by 2, 3 or 4: uneven chunks too
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<std::vector<float>> inputs(world(), std::vector<float>(n));
    for (int r = 0; r < world(); ++r) {
      std::mt19937 random(1234 + r);
      std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
      for (float& x : inputs[r]) x = round_to(dtype, uniform(random));
    }
    Tensor t = make_tensor(dtype, inputs[rank()]);
    comm().all_reduce(t);
    const std::vector<float> got = read_floats(t);
    int64_t mismatches = 0, differs_from_one_rounding = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = ring_sum(inputs, i, dtype);
      mismatches += same_bits(got[i], want) ? 0 : 1;
      double exact = 0;
      for (int r = 0; r < world(); ++r) exact += inputs[r][i];
      differs_from_one_rounding += want == round_to(dtype, static_cast<float>(exact)) ? 0 : 1;
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(dtype);
    // With three or more ranks the per-hop roundings really differ from
    // rounding the exact sum once, so the check above tells them apart.
    if (world() >= 3) {
      EXPECT_GT(differs_from_one_rounding, 0) << dtype_name(dtype);
    }
  }
}

TEST(Collectives, AllReduceMaxTakesTheLargestAndPropagatesNaN) {
  for (DType dtype : kFloatTypes) {
    std::vector<float> values = {static_cast<float>(rank()), -static_cast<float>(rank()), 1.5f,
                                 rank() == 1 ? std::numeric_limits<float>::quiet_NaN() : 0.0f};
    Tensor t = make_tensor(dtype, values);
    comm().all_reduce(t, ReduceOp::kMax);
    const std::vector<float> got = read_floats(t);
    EXPECT_EQ(got[0], world() - 1.0f) << dtype_name(dtype);
    EXPECT_EQ(got[1], 0.0f) << dtype_name(dtype);
    EXPECT_EQ(got[2], 1.5f) << dtype_name(dtype);
    EXPECT_TRUE(std::isnan(got[3])) << dtype_name(dtype);
  }
}

TEST(Collectives, AllReduceOfSizesThatDoNotDivideSendsEachRanksChunks) {
  for (int64_t n : {1, 2, 5, 7, 1001}) {
    Tensor t = make_tensor(DType::kF32, integers(rank(), n));
    // Reduce-scatter sends every chunk but this rank's own, all-gather every
    // chunk but its successor's.
    const int64_t sent =
        2 * n - chunk_size(n, world(), rank()) - chunk_size(n, world(), (rank() + 1) % world());
    expect_sends(CommOp::kAllReduce, sent, 4, [&] { comm().all_reduce(t); });
    EXPECT_EQ(read_floats(t), integer_sum(n)) << "n = " << n;
  }
}

TEST(Collectives, ReduceScatterLeavesEachRankItsReducedChunk) {
  const int64_t chunk = 96;
  const int64_t n = chunk * world();
  const std::vector<float> sum = integer_sum(n);
  const std::vector<float> own(sum.begin() + rank() * chunk, sum.begin() + (rank() + 1) * chunk);
  for (DType dtype : kFloatTypes) {
    Tensor in = make_tensor(dtype, integers(rank(), n));
    Tensor out = zeros(dtype, chunk);
    expect_sends(CommOp::kReduceScatter, n * (world() - 1) / world(), dtype_size(dtype),
                 [&] { comm().reduce_scatter(in, out); });
    EXPECT_EQ(read_floats(out), own) << dtype_name(dtype);
    EXPECT_EQ(read_floats(in), read_floats(make_tensor(dtype, integers(rank(), n))))
        << "the input is left as it was";

    Tensor in_place = in.view(rank() * chunk, {chunk});
    comm().reduce_scatter(in, in_place);
    EXPECT_EQ(read_floats(in_place), own) << dtype_name(dtype) << " in place";
  }
}

TEST(Collectives, AllGatherPutsEveryRanksChunkInPlace) {
  const int64_t chunk = 50;
  const int64_t n = chunk * world();
  const std::vector<float> want = every_ranks_integers(chunk);
  for (DType dtype : kFloatTypes) {
    Tensor in = make_tensor(dtype, integers(rank(), chunk));
    Tensor out = zeros(dtype, n);
    expect_sends(CommOp::kAllGather, n * (world() - 1) / world(), dtype_size(dtype),
                 [&] { comm().all_gather(in, out); });
    EXPECT_EQ(read_floats(out), want) << dtype_name(dtype);

    Tensor gathered = zeros(dtype, n);
    Tensor own = gathered.view(rank() * chunk, {chunk});
    cpu().copy(own, in);
    comm().all_gather(own, gathered);
    EXPECT_EQ(read_floats(gathered), want) << dtype_name(dtype) << " in place";
  }
}

TEST(Collectives, AllGatherMovesAnyDtype) {
  Tensor in = cpu().empty({3}, DType::kI32, MemoryCategory::kCommBuffers);
  for (int i = 0; i < 3; ++i) in.data_as<int32_t>()[i] = 100 * rank() + i;
  Tensor out = cpu().empty({3 * world()}, DType::kI32, MemoryCategory::kCommBuffers);
  comm().all_gather(in, out);
  for (int r = 0; r < world(); ++r) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out.data_as<int32_t>()[3 * r + i], 100 * r + i);
  }
}

TEST(Collectives, BroadcastCopiesTheRootsTensorInSegments) {
  // 600k bf16 elements: 1.2 MB, more than one 1 MiB broadcast segment.
  for (int64_t n : {int64_t{5}, int64_t{600000}}) {
    for (int root : {0, world() - 1}) {
      Tensor t = make_tensor(DType::kBF16, integers(rank(), n));
      // A chain from the root: every rank but the root's predecessor forwards.
      const bool last = (rank() + 1) % world() == root;
      expect_sends(CommOp::kBroadcast, last ? 0 : n, 2, [&] { comm().broadcast(t, root); });
      EXPECT_EQ(read_floats(t), read_floats(make_tensor(DType::kBF16, integers(root, n))))
          << "n = " << n << ", root " << root;
    }
  }
}

TEST(Collectives, BarrierSendsOneByteToEachOtherRank) {
  expect_sends(CommOp::kBarrier, world() - 1, 1, [&] { comm().barrier(); });
}

TEST(Collectives, AsyncOpsRunInSubmissionOrderWhileTheCallerComputes) {
  const int64_t n = 60000 * world();
  Tensor big = make_tensor(DType::kF32, integers(rank(), n));
  Tensor in = make_tensor(DType::kBF16, integers(rank(), 10));
  Tensor gathered = zeros(DType::kBF16, 10 * world());
  Tensor small = make_tensor(DType::kF16, integers(rank(), 3));
  CommHandle first = comm().all_reduce_async(big);
  CommHandle second = comm().all_gather_async(in, gathered);
  CommHandle third = comm().all_reduce_async(small, ReduceOp::kMax);
  // Compute while the collectives run.
  double busy = 0;
  for (int i = 1; i < 200000; ++i) busy += std::sqrt(static_cast<double>(i));
  EXPECT_GT(busy, 0);
  third.wait();
  EXPECT_TRUE(first.done());
  EXPECT_TRUE(second.done());
  first.wait();
  second.wait();
  EXPECT_EQ(read_floats(big), integer_sum(n));
  std::vector<float> max = integers(0, 3);
  for (int r = 1; r < world(); ++r) {
    for (int i = 0; i < 3; ++i) max[i] = std::max(max[i], integers(r, 3)[i]);
  }
  EXPECT_EQ(read_floats(small), max);
  EXPECT_EQ(read_floats(gathered), every_ranks_integers(10));
}

TEST(StoreAcrossProcesses, SetGetWaitAndAddMeetAcrossRanks) {
  const std::string me = std::to_string(rank());
  EXPECT_LE(store().add("store_test/arrived", 1), world());
  store().set("store_test/value/" + me, "from rank " + me);
  std::vector<std::string> keys;
  for (int r = 0; r < world(); ++r) keys.push_back("store_test/value/" + std::to_string(r));
  store().wait(keys, std::chrono::seconds(20));
  for (int r = 0; r < world(); ++r) {
    EXPECT_EQ(store().get(keys[r], std::chrono::seconds(1)), "from rank " + std::to_string(r));
  }
  EXPECT_EQ(store().add("store_test/arrived", 0), world());
}

// Ranks 0 and 1 must fail within the timeout, naming rank 2 and the op.
void expect_failure_names_rank_2(const std::chrono::steady_clock::time_point start,
                                 const EngineError& e) {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::cout << "rank " << rank() << " failed after " << elapsed.count() << " s: " << e.what()
            << "\n";
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_THAT(e.what(), HasSubstr("all_reduce: rank 2 ("));
  EXPECT_LT(elapsed.count(), std::chrono::duration<double>(timeout()).count() + 3.0);
  // The ring is gone: later ops fail at once with the same cause.
  try {
    comm().barrier();
    ADD_FAILURE() << "a barrier succeeded after the ring broke";
  } catch (const EngineError& later) {
    EXPECT_EQ(later.code(), ErrorCode::kUnavailable);
    EXPECT_THAT(later.what(), HasSubstr("barrier: communicator unusable"));
  }
}

TEST(PeerDeath, RanksFailNamingAPeerKilledBeforeAnAllReduce) {
  comm().barrier();
  if (rank() == 2) raise(SIGKILL);
  Tensor t = make_tensor(DType::kF32, integers(rank(), 1000));
  const auto start = std::chrono::steady_clock::now();
  try {
    comm().all_reduce(t);
    ADD_FAILURE() << "all_reduce succeeded without rank 2";
  } catch (const EngineError& e) {
    expect_failure_names_rank_2(start, e);
  }
}

TEST(PeerDeath, RanksTimeOutNamingAPeerThatHangs) {
  comm().barrier();
  if (rank() == 2) raise(SIGSTOP);  // alive, sockets open, silent; the launcher kills it
  Tensor t = make_tensor(DType::kF32, integers(rank(), 1000));
  const auto start = std::chrono::steady_clock::now();
  try {
    comm().all_reduce(t);
    ADD_FAILURE() << "all_reduce succeeded without rank 2";
  } catch (const EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("did not respond within"));
    expect_failure_names_rank_2(start, e);
  }
}

}  // namespace
}  // namespace mixtrain::comm_test
