// Why: a ring hop must round exactly like NCCL's (fp32 arithmetic, one
// rounding to the dtype), or ranks' results drift from what GPU training
// would produce. Checked here on values where one rounding and two
// roundings differ.
#include "engine/comm/cpu_reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "comm_test_util.h"
#include "test_support/engine_error.h"

namespace mixtrain {
namespace {

using comm_test::make_tensor;
using comm_test::read_floats;

TEST(ReduceElements, SumsRoundOncePerHopToTheDtype) {
  // fp16 has 11 significant bits: 2048 + 1 is a tie that rounds to even (2048).
  Tensor a = make_tensor(DType::kF16, {2048.0f, 1.0f, -0.5f});
  Tensor b = make_tensor(DType::kF16, {1.0f, 0.00048828125f, 0.25f});
  reduce_elements(a.data(), a.data(), b.data(), 3, DType::kF16, ReduceOp::kSum);
  EXPECT_EQ(read_floats(a), (std::vector<float>{2048.0f, 1.0f, -0.25f}));

  // bf16 has 8: 256 + 1 rounds to 256, 256 + 3 to 260 (nearest even of 258/260).
  Tensor c = make_tensor(DType::kBF16, {256.0f, 256.0f});
  Tensor d = make_tensor(DType::kBF16, {1.0f, 3.0f});
  Tensor out = make_tensor(DType::kBF16, {0.0f, 0.0f});
  reduce_elements(out.data(), c.data(), d.data(), 2, DType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(read_floats(out), (std::vector<float>{256.0f, 260.0f}));
}

TEST(ReduceElements, MaxPropagatesNaNFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = make_tensor(DType::kF32, {1.0f, nan, 3.0f, -INFINITY});
  Tensor b = make_tensor(DType::kF32, {2.0f, 0.0f, nan, -1.0f});
  reduce_elements(a.data(), a.data(), b.data(), 4, DType::kF32, ReduceOp::kMax);
  const std::vector<float> got = read_floats(a);
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], -1.0f);
}

TEST(ReduceElements, RejectsNonFloatDtypes) {
  int32_t x = 1;
  EXPECT_TRUE(test_support::throws_invalid_argument(
      [&] { reduce_elements(&x, &x, &x, 1, DType::kI32, ReduceOp::kSum); }, {"int32"}));
}

}  // namespace
}  // namespace mixtrain
