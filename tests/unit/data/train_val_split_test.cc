// Why: a wrong split silently trains on validation data or evaluates on
// nothing; sizes must be exact and impossible configurations must fail
// before training with a message that says which part is too small.
#include "engine/data/train_val_split.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "data_test_util.h"

namespace mixtrain {
namespace {

using testing::TempDir;
using testing::throws_invalid_argument;

TokenBuffer iota_tokens(size_t n) {
  TokenBuffer tokens(n);
  std::iota(tokens.begin(), tokens.end(), uint16_t{0});
  return tokens;
}

TEST(SplitTrainVal, LastFractionBecomesVal) {
  const TrainValTokens split = split_train_val(iota_tokens(1000), 0.1, 8, "src");
  ASSERT_EQ(split.train->size(), 900u);
  ASSERT_EQ(split.val->size(), 100u);
  EXPECT_EQ(split.train->back(), 899);
  EXPECT_EQ(split.val->front(), 900);
  EXPECT_EQ(split.val->back(), 999);
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
  const TrainValTokens data = load_train_val(spec, 256, 4);
  EXPECT_EQ(*data.train, (TokenBuffer{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'}));
  EXPECT_EQ(*data.val, (TokenBuffer{'v', 'w', 'x', 'y', 'z'}));
}

TEST(LoadTrainVal, DefaultValFractionIsTenPercent) {
  config::DataSpec spec;
  spec.train = "builtin:demo";
  const TrainValTokens data = load_train_val(spec, 256, 64);
  const size_t total = data.train->size() + data.val->size();
  EXPECT_GT(total, 300000u);
  EXPECT_EQ(data.val->size(), total / 10);
}

TEST(LoadTrainVal, FractionOfBuiltinDemo) {
  config::DataSpec spec;
  spec.train = "builtin:demo";
  spec.val_fraction = 0.1;
  const TrainValTokens data = load_train_val(spec, 256, 64);
  const size_t total = data.train->size() + data.val->size();
  EXPECT_EQ(data.val->size(), total / 10);
}

TEST(LoadTrainVal, Errors) {
  TempDir dir;
  const std::string short_path = dir.write("short.txt", "abc");
  config::DataSpec spec;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4); }, {"data.train"}));
  spec.train = short_path;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4); },
                                      {short_path, "holds 3 tokens", "seq_len + 1 = 5"}));
  spec.train = "builtin:demo";
  spec.val = short_path;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4); },
                                      {short_path, "holds 3 tokens"}));
  spec.val_fraction = 0.1;
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 4); },
                                      {"data.val or data.val_fraction, not both"}));
  spec.val.reset();
  EXPECT_TRUE(throws_invalid_argument([&] { load_train_val(spec, 256, 0); }, {"seq_len 0"}));
}

}  // namespace
}  // namespace mixtrain
