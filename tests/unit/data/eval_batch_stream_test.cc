// Why: validation losses are compared across evaluations and runs, so every
// evaluation must see exactly the same windows whatever happened before.
#include "engine/data/eval_batch_stream.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "data_test_util.h"

namespace mixtrain {
namespace {

using testing::counting_corpus;
using testing::throws_invalid_argument;

SamplerConfig train_config(uint64_t seed, int64_t world_size = 1, int64_t rank = 0) {
  return {.micro_batch = 4,
          .seq_len = 8,
          .grad_accum = 3,
          .world_size = world_size,
          .rank = rank,
          .seed = seed};
}

std::vector<std::vector<int64_t>> all_starts(const EvalBatchStream& stream) {
  std::vector<std::vector<int64_t>> starts;
  for (int64_t i = 0; i < stream.num_batches(); ++i)
    starts.push_back(stream.batch(i).window_starts);
  return starts;
}

TEST(EvalBatchStream, EveryEvaluationSeesTheSameBatches) {
  const EvalBatchStream stream(counting_corpus(5000), train_config(1), 6);
  const auto first = all_starts(stream);
  EXPECT_EQ(all_starts(stream), first);
  EXPECT_EQ(first.size(), 6u);
  EXPECT_NE(first[0], first[1]);
  for (int64_t i = 0; i < stream.num_batches(); ++i) {
    const TokenBatch batch = stream.batch(i);
    EXPECT_EQ(batch.batch_size, 4);
    EXPECT_EQ(batch.inputs.size(), 32u);
  }
}

TEST(EvalBatchStream, IndependentOfTrainSeedAndDifferentFromTraining) {
  const auto val = counting_corpus(5000);
  const EvalBatchStream a(val, train_config(1), 4);
  const EvalBatchStream b(val, train_config(999), 4);
  EXPECT_EQ(all_starts(a), all_starts(b));
  BatchSampler train(val, train_config(1));
  EXPECT_NE(a.batch(0).window_starts, train.next_step()[0].window_starts);
}

TEST(EvalBatchStream, RanksSplitEachGlobalEvalBatch) {
  const auto val = counting_corpus(5000);
  const EvalBatchStream rank0(val, train_config(1, 2, 0), 3);
  const EvalBatchStream rank1(val, train_config(1, 2, 1), 3);
  const EvalBatchStream single(val, {.micro_batch = 8, .seq_len = 8, .seed = 1}, 3);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<int64_t> joined = rank0.batch(i).window_starts;
    const std::vector<int64_t> second = rank1.batch(i).window_starts;
    joined.insert(joined.end(), second.begin(), second.end());
    EXPECT_EQ(joined, single.batch(i).window_starts);
  }
}

TEST(EvalBatchStream, Errors) {
  const auto val = counting_corpus(100);
  EXPECT_TRUE(throws_invalid_argument([&] { EvalBatchStream(val, train_config(1), 0); },
                                      {"eval_batches 0"}));
  const EvalBatchStream stream(val, train_config(1), 2);
  EXPECT_TRUE(throws_invalid_argument([&] { stream.batch(2); }, {"eval batch 2", "0..1"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { EvalBatchStream(counting_corpus(8), train_config(1), 1); },
                              {"8 tokens", "seq_len + 1 = 9"}));
}

}  // namespace
}  // namespace mixtrain
