// Why: a wrong split silently trains on validation data or evaluates on
// nothing; sizes must be exact and impossible configurations must fail
// before training with a message that says which part is too small.
#include "engine/data/train_val_split.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <string>

#include "data_test_util.h"
#include "engine/data/token_source.h"

namespace mixtrain {
namespace {

using testing::TempDir;
using testing::test_tracker;
using testing::throws_invalid_argument;
using testing::tokens_of;
using Tokens = std::vector<uint16_t>;

TokenCorpus iota_tokens(size_t n) {
  Tokens tokens(n);
  std::iota(tokens.begin(), tokens.end(), uint16_t{0});
  return testing::corpus_of(tokens);
}

TEST(SplitTrainVal, LastFractionBecomesVal) {
  const TrainValTokens split = split_train_val(iota_tokens(1000), 0.1, 8, "src");
  ASSERT_EQ(split.train->size(), 900u);
  ASSERT_EQ(split.val->size(), 100u);
  EXPECT_EQ((*split.train)[899], 899);
  EXPECT_EQ((*split.val)[0], 900);
  EXPECT_EQ((*split.val)[99], 999);
}

TEST(SplitTrainVal, ValCountIsFloorOfFraction) {
  const TrainValTokens split = split_train_val(iota_tokens(1115394), 0.1, 256, "src");
  EXPECT_EQ(split.val->size(), 111539u);
  EXPECT_EQ(split.train->size(), 1115394u - 111539u);
}

TEST(SplitTrainVal, FractionOutsideOpenInterval) {
  for (double f : {0.0, 1.0, -0.5, 1.5}) {
    EXPECT_TRUE(throws_invalid_argument([&] { split_train_val(iota_tokens(100), f, 4, "src"); },
                                        {"val_fraction", "between 0 and 1"}));
  }
}

TEST(SplitTrainVal, EachPartNeedsOneWindow) {
  // 100 tokens, 5% val = 5 tokens < seq_len + 1 = 9.
  EXPECT_TRUE(
      throws_invalid_argument([] { split_train_val(iota_tokens(100), 0.05, 8, "corpus.txt"); },
                              {"val_fraction 0.05,", "validation part of 'corpus.txt'",
                               "holds 5 tokens", "seq_len + 1 = 9"}));
  // 95% val leaves 5 train tokens.
  EXPECT_TRUE(
      throws_invalid_argument([] { split_train_val(iota_tokens(100), 0.95, 8, "corpus.txt"); },
                              {"training part of 'corpus.txt'", "holds 5 tokens"}));
  // Exactly seq_len + 1 in each part is enough.
  const TrainValTokens split = split_train_val(iota_tokens(18), 0.5, 8, "src");
  EXPECT_EQ(split.train->size(), 9u);
  EXPECT_EQ(split.val->size(), 9u);
}

TEST(LoadTrainVal, SeparateValFile) {
  TempDir dir;
  config::DataSpec spec;
  spec.train = dir.write("train.txt", "abcdefghij");
  spec.val = dir.write("val.txt", "vwxyz");
  const TrainValTokens data = load_train_val(spec, 256, 4, test_tracker());
  EXPECT_EQ(tokens_of(*data.train), (Tokens{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'}));
  EXPECT_EQ(tokens_of(*data.val), (Tokens{'v', 'w', 'x', 'y', 'z'}));
}

TEST(LoadTrainVal, DefaultValFractionIsTenPercent) {
  config::DataSpec spec;
  spec.train = "builtin:demo";
  const TrainValTokens data = load_train_val(spec, 256, 64, test_tracker());
  const size_t total = data.train->size() + data.val->size();
  EXPECT_GT(total, 300000u);
  EXPECT_EQ(data.val->size(), total / 10);
}

TEST(LoadTrainVal, FractionOfBuiltinDemo) {
  config::DataSpec spec;
  spec.train = "builtin:demo";
  spec.val_fraction = 0.1;
  const TrainValTokens data = load_train_val(spec, 256, 64, test_tracker());
  const size_t total = data.train->size() + data.val->size();
  EXPECT_EQ(data.val->size(), total / 10);
}

// Anonymous memory of this process now (RssAnon), in bytes.
size_t anonymous_rss() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  }
  return 0;
}

// Issue 29: 1.2 GB of text cost 2.4 GB of process memory that no limit
// saw. A text file is mapped: splitting it and reading every token of both
// parts adds page cache, not anonymous memory.
TEST(LoadTrainVal, ATextFileCostsNoProcessMemory) {
  if (anonymous_rss() == 0) GTEST_SKIP() << "no RssAnon in /proc/self/status";
  TempDir dir;
  config::DataSpec spec;
  {
    std::ofstream out(dir.path("big.txt"), std::ios::binary);
    const std::string line = "the quick fox chases the old owl.\n";
    for (size_t written = 0; written < (size_t{64} << 20); written += line.size()) out << line;
  }
  spec.train = dir.path("big.txt");
  MemoryTracker tracker;
  const size_t before = anonymous_rss();
  const TrainValTokens data = load_train_val(spec, 256, 64, tracker);
  uint64_t sum = 0;
  for (const auto& part : {data.train, data.val})
    for (size_t i = 0; i < part->size(); ++i) sum += (*part)[i];
  EXPECT_GT(sum, 0u);
  EXPECT_GE(data.train->size() + data.val->size(), size_t{64} << 20);
  // A vector of uint16 would add 128 MiB; allow the allocator some slack.
  EXPECT_LT(anonymous_rss() - std::min(before, anonymous_rss()), size_t{16} << 20);
  EXPECT_EQ(tracker.peak_total(MemoryPool::kHost), 0u);
  EXPECT_EQ(data_bytes_in_memory(spec), 0);
}

TEST(LoadTrainVal, DataBytesInMemoryCountsBuiltinSources) {
  config::DataSpec spec;
  spec.train = "builtin:demo";
  const int64_t demo = corpus_bytes_in_memory("builtin:demo");
  EXPECT_GT(demo, 300000);
  EXPECT_EQ(data_bytes_in_memory(spec), demo);
  spec.val = "builtin:demo";  // a second copy
  EXPECT_EQ(data_bytes_in_memory(spec), 2 * demo);
  spec.val = "val.txt";
  EXPECT_EQ(data_bytes_in_memory(spec), demo);
}

TEST(LoadTrainVal, Errors) {
  TempDir dir;
  const std::string short_path = dir.write("short.txt", "abc");
  config::DataSpec spec;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4, test_tracker()); },
                                      {"data.train"}));
  spec.train = short_path;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4, test_tracker()); },
                                      {short_path, "holds 3 tokens", "seq_len + 1 = 5"}));
  spec.train = "builtin:demo";
  spec.val = short_path;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4, test_tracker()); },
                                      {short_path, "holds 3 tokens"}));
  spec.val_fraction = 0.1;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4, test_tracker()); },
                                      {"data.val or data.val_fraction, not both"}));
  spec.val.reset();
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 0, test_tracker()); },
                                      {"seq_len 0"}));
}

}  // namespace
}  // namespace mixtrain
