// Why: "did you mean" must catch real typos (a swap, a missing underscore)
// without suggesting unrelated keys.
#include "jobspec/closest_key.h"

#include <gtest/gtest.h>

#include <array>

namespace mixtrain::jobspec {
namespace {

constexpr std::array<std::string_view, 5> kTrainKeys = {"steps", "micro_batch", "grad_accum", "lr",
                                                        "min_lr"};

TEST(ClosestKey, FindsTyposWithinTheirBudget) {
  EXPECT_EQ(closest_key("microbatch", kTrainKeys), "micro_batch");  // one deletion
  EXPECT_EQ(closest_key("stpes", kTrainKeys), "steps");             // one swap
  EXPECT_EQ(closest_key("lt", kTrainKeys), "lr");                   // one substitution
  EXPECT_EQ(closest_key("grad_acum", kTrainKeys), "grad_accum");
}

TEST(ClosestKey, SuggestsNothingForUnrelatedKeys) {
  EXPECT_FALSE(closest_key("sharding", kTrainKeys).has_value());
  EXPECT_FALSE(closest_key("xy", kTrainKeys).has_value());  // 2 edits from "lr" is too many
  EXPECT_FALSE(closest_key("steps", std::span<const std::string_view>{}).has_value());
}

TEST(ClosestKey, ExactMatchWins) { EXPECT_EQ(closest_key("min_lr", kTrainKeys), "min_lr"); }

}  // namespace
}  // namespace mixtrain::jobspec
