// Why: reproducibility, resumption and data-parallel equivalence all rest
// on the sampler: same seed same batches, checkpointed position continues
// identically, and the global windows of a step do not depend on how many
// ranks share them.
#include "engine/data/batch_sampler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "data_test_util.h"

namespace mixtrain {
namespace {

using testing::counting_corpus;
using testing::throws_invalid_argument;

SamplerConfig config(int64_t micro_batch, int64_t grad_accum, int64_t world_size, int64_t rank,
                     uint64_t seed = 1337) {
  return {.micro_batch = micro_batch,
          .seq_len = 16,
          .grad_accum = grad_accum,
          .world_size = world_size,
          .rank = rank,
          .seed = seed};
}

std::vector<std::vector<int32_t>> draw_inputs(BatchSampler& sampler, int steps) {
  std::vector<std::vector<int32_t>> inputs;
  for (int s = 0; s < steps; ++s) {
    for (const TokenBatch& batch : sampler.next_step()) inputs.push_back(batch.inputs);
  }
  return inputs;
}

TEST(BatchSampler, ShapesTargetsShiftedAndWindowsInsideCorpus) {
  const auto corpus = counting_corpus(1000);
  BatchSampler sampler(corpus, config(4, 3, 1, 0));
  for (int step = 0; step < 50; ++step) {
    const std::vector<TokenBatch> batches = sampler.next_step();
    ASSERT_EQ(batches.size(), 3u);
    for (const TokenBatch& batch : batches) {
      ASSERT_EQ(batch.batch_size, 4);
      ASSERT_EQ(batch.seq_len, 16);
      ASSERT_EQ(batch.inputs.size(), 64u);
      ASSERT_EQ(batch.targets.size(), 64u);
      for (int64_t b = 0; b < 4; ++b) {
        const int64_t start = batch.window_starts[b];
        ASSERT_GE(start, 0);
        ASSERT_LE(start + 16 + 1, 1000);
        for (int64_t t = 0; t < 16; ++t) {
          ASSERT_EQ(batch.inputs[b * 16 + t], (*corpus)[start + t]);
          ASSERT_EQ(batch.targets[b * 16 + t], (*corpus)[start + t + 1]);
        }
      }
    }
  }
}

TEST(BatchSampler, ReachesBothEndsOfATinyCorpus) {
  // 18 tokens, seq_len 16: only starts 0 and 1 fit.
  BatchSampler sampler(counting_corpus(18), config(8, 1, 1, 0));
  std::vector<int> seen(2, 0);
  for (int step = 0; step < 20; ++step) {
    const std::vector<TokenBatch> batches = sampler.next_step();
    for (int64_t start : batches[0].window_starts) {
      ASSERT_TRUE(start == 0 || start == 1) << start;
      ++seen[start];
    }
  }
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
}

TEST(BatchSampler, SameSeedSameBatchesDifferentSeedDifferent) {
  const auto corpus = counting_corpus(100000);
  BatchSampler a(corpus, config(4, 2, 1, 0, 7));
  BatchSampler b(corpus, config(4, 2, 1, 0, 7));
  BatchSampler c(corpus, config(4, 2, 1, 0, 8));
  const auto drawn_a = draw_inputs(a, 10);
  EXPECT_EQ(drawn_a, draw_inputs(b, 10));
  EXPECT_NE(drawn_a, draw_inputs(c, 10));
}

TEST(BatchSampler, StepsDiffer) {
  BatchSampler sampler(counting_corpus(100000), config(4, 1, 1, 0));
  EXPECT_NE(sampler.global_window_starts(0), sampler.global_window_starts(1));
}

// Pinned: the window sequence is part of reproducibility across releases
// and standard libraries (mt19937_64 is fully specified by the standard).
TEST(BatchSampler, PinnedWindowStarts) {
  BatchSampler sampler(counting_corpus(100000), config(4, 1, 1, 0, 1337));
  EXPECT_EQ(sampler.global_window_starts(0), (std::vector<int64_t>{7308, 37858, 95340, 95280}));
}

TEST(BatchSampler, GlobalWindowsIndependentOfWorldSize) {
  const auto corpus = counting_corpus(50000);
  // Global batch 16 windows per step, split as W=1 (B 4, accum 4),
  // W=2 (B 4, accum 2), W=4 (B 2, accum 2).
  struct Split {
    int64_t micro_batch, grad_accum, world_size;
  };
  const Split splits[] = {{4, 4, 1}, {4, 2, 2}, {2, 2, 4}};
  std::vector<std::vector<int64_t>> reference;
  for (const Split& split : splits) {
    std::vector<BatchSampler> ranks;
    for (int64_t r = 0; r < split.world_size; ++r) {
      ranks.emplace_back(corpus, config(split.micro_batch, split.grad_accum, split.world_size, r));
    }
    std::vector<std::vector<int64_t>> per_step;
    for (int step = 0; step < 5; ++step) {
      std::vector<std::vector<TokenBatch>> rank_batches;
      for (BatchSampler& sampler : ranks) rank_batches.push_back(sampler.next_step());
      // Reassemble the global order: micro-step major, then rank, then row.
      std::vector<int64_t> global;
      for (int64_t m = 0; m < split.grad_accum; ++m) {
        for (int64_t r = 0; r < split.world_size; ++r) {
          const TokenBatch& batch = rank_batches[r][m];
          global.insert(global.end(), batch.window_starts.begin(), batch.window_starts.end());
        }
      }
      ASSERT_EQ(global, ranks[0].global_window_starts(step));
      per_step.push_back(global);
    }
    if (reference.empty()) reference = per_step;
    EXPECT_EQ(per_step, reference) << "world size " << split.world_size;
  }
}

TEST(BatchSampler, RanksTakeDisjointSlices) {
  const auto corpus = counting_corpus(1 << 20);
  BatchSampler rank0(corpus, config(8, 1, 2, 0));
  BatchSampler rank1(corpus, config(8, 1, 2, 1));
  const std::vector<int64_t> global = rank0.global_window_starts(0);
  const std::vector<int64_t> first = rank0.next_step()[0].window_starts;
  const std::vector<int64_t> second = rank1.next_step()[0].window_starts;
  EXPECT_EQ(first, std::vector<int64_t>(global.begin(), global.begin() + 8));
  EXPECT_EQ(second, std::vector<int64_t>(global.begin() + 8, global.end()));
}

TEST(BatchSampler, RestoreContinuesIdentically) {
  const auto corpus = counting_corpus(100000);
  BatchSampler original(corpus, config(4, 2, 1, 0));
  draw_inputs(original, 7);
  const SamplerState saved = original.state();
  EXPECT_EQ(saved.seed, 1337u);
  EXPECT_EQ(saved.next_step, 7u);
  const auto expected = draw_inputs(original, 5);

  BatchSampler resumed(corpus, config(4, 2, 1, 0));
  resumed.restore(saved);
  EXPECT_EQ(draw_inputs(resumed, 5), expected);
  EXPECT_EQ(resumed.state().next_step, 12u);
}

TEST(BatchSampler, RestoreRejectsAnotherSeed) {
  BatchSampler sampler(counting_corpus(1000), config(1, 1, 1, 0, 1));
  EXPECT_TRUE(throws_invalid_argument([&] { sampler.restore({.seed = 2, .next_step = 3}); },
                                      {"seed 2", "configured seed 1"}));
}

TEST(BatchSampler, ConfigAndCorpusErrors) {
  const auto corpus = counting_corpus(1000);
  EXPECT_TRUE(throws_invalid_argument([&] { BatchSampler(nullptr, config(1, 1, 1, 0)); },
                                      {"no token buffer"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { BatchSampler(counting_corpus(16), config(1, 1, 1, 0)); },
                              {"16 tokens", "seq_len + 1 = 17"}));
  EXPECT_TRUE(throws_invalid_argument([&] { BatchSampler(corpus, config(0, 1, 1, 0)); },
                                      {"micro_batch 0"}));
  EXPECT_TRUE(throws_invalid_argument([&] { BatchSampler(corpus, config(1, 1, 2, 2)); },
                                      {"rank 2", "world size 2"}));
}

TEST(GatherWindows, RejectsWindowsPastTheEnd) {
  const auto corpus = counting_corpus(20);
  EXPECT_EQ(gather_windows(*corpus, {3}, 16).targets.back(), 19);
  EXPECT_TRUE(throws_invalid_argument([&] { gather_windows(*corpus, {4}, 16); },
                                      {"window start 4", "corpus of 20 tokens"}));
}

}  // namespace
}  // namespace mixtrain
