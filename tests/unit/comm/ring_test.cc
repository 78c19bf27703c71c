// Why: ZeRO's summary must report exactly the ring's per-rank traffic
// (2n(N-1)/N elements per all-reduce, n(N-1)/N per reduce-scatter or
// all-gather), and the benchmark nccl-tests' bandwidths; both rest on the
// chunk cut and the formulas checked here.
#include "engine/comm/ring.h"

#include <gtest/gtest.h>

#include "engine/comm/comm_stats.h"
#include "comm_test_util.h"

namespace mixtrain {
namespace {

TEST(RingChunk, CutsContiguousChunksWithTheRemainderFirst) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t n : {0, 1, 5, 12, 1001}) {
      int64_t next = 0;
      for (int c = 0; c < world; ++c) {
        const RingChunk chunk = ring_chunk(n, world, c);
        EXPECT_EQ(chunk.offset, next) << n << " over " << world;
        EXPECT_EQ(chunk.size, comm_test::chunk_size(n, world, c)) << n << " over " << world;
        next += chunk.size;
      }
      EXPECT_EQ(next, n);
      EXPECT_EQ(ring_chunk(n, world, -1).offset, ring_chunk(n, world, world - 1).offset);
    }
  }
}

TEST(RingSentElements, MatchesTheRingFormulasForDivisibleSizes) {
  const int64_t n = 1200;
  for (int world : {2, 3, 4}) {
    for (int rank = 0; rank < world; ++rank) {
      EXPECT_EQ(ring_sent_elements(CommOp::kAllReduce, n, world, rank, 0),
                2 * n * (world - 1) / world);
      EXPECT_EQ(ring_sent_elements(CommOp::kReduceScatter, n, world, rank, 0),
                n * (world - 1) / world);
      EXPECT_EQ(ring_sent_elements(CommOp::kAllGather, n, world, rank, 0), n * (world - 1) / world);
      EXPECT_EQ(ring_sent_elements(CommOp::kBroadcast, n, world, rank, 1),
                (rank + 1) % world == 1 ? 0 : n);
      EXPECT_EQ(ring_sent_elements(CommOp::kBarrier, 0, world, rank, 0), world - 1);
    }
  }
  EXPECT_EQ(ring_sent_elements(CommOp::kAllReduce, n, 1, 0, 0), 0);
}

TEST(CommStats, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(2e9, 0.5), 4.0);
  EXPECT_DOUBLE_EQ(busbw_gbps(CommOp::kAllReduce, 2, 2e9, 0.5), 4.0);
  EXPECT_EQ(std::string(comm_op_name(CommOp::kReduceScatter)), "reduce_scatter");
}

TEST(CommStats, SinceSubtractsAnEarlierSnapshot) {
  CommStats earlier;
  earlier[CommOp::kAllReduce] = {1, 100, 400, 0.5};
  CommStats later = earlier;
  later[CommOp::kAllReduce].calls += 2;
  later[CommOp::kAllReduce].elements_sent += 50;
  later[CommOp::kAllReduce].bytes_sent += 200;
  later[CommOp::kBarrier].calls = 1;
  const CommStats delta = later.since(earlier);
  EXPECT_EQ(delta[CommOp::kAllReduce].calls, 2);
  EXPECT_EQ(delta[CommOp::kAllReduce].elements_sent, 50);
  EXPECT_EQ(delta[CommOp::kAllReduce].bytes_sent, 200);
  EXPECT_EQ(delta.total().calls, 3);
}

}  // namespace
}  // namespace mixtrain
