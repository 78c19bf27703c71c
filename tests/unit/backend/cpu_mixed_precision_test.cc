// Why: the loss scaler skips a step exactly when unscale_and_check says so
// and reports NaN vs inf events from its answer, and gradient clipping uses
// sum_squares; a wrong tensor index, a missed NaN or a tensor left scaled
// would corrupt training silently. Each contract clause is checked here.
//
// Note on overflow: unscale_and_check judges the values as stored. The loss
// scaler multiplies by inv_scale <= 1, which can never turn a finite value
// into inf; only an inv_scale > 1 (tested below) can overflow fp16/bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// A list of tensors of mixed dtypes and sizes: chunk-crossing, tiny, empty.
std::vector<Tensor> gradient_list(Backend& backend) {
  const std::vector<std::pair<int64_t, DType>> specs = {{20000, DType::kF32}, {777, DType::kBF16},
                                                        {9000, DType::kF16},  {0, DType::kF32},
                                                        {3, DType::kBF16},    {8192, DType::kF32}};
  std::vector<Tensor> list;
  uint32_t seed = 1;
  for (const auto& [numel, dtype] : specs) {
    list.push_back(make_tensor(backend, {numel}, dtype, random_values(numel, seed++, -3.0, 3.0)));
  }
  return list;
}

TEST(CpuSumSquares, MatchesDoubleSumAndIsThreadCountIndependent) {
  auto backend = make_backend("cpu");
  const std::vector<Tensor> list = gradient_list(*backend);
  double want = 0.0;
  for (const Tensor& t : list) {
    for (double x : values_of(*backend, t)) want += x * x;
  }
  std::vector<double> got;
  for (int threads : {1, 2, 3}) {
    with_threads(threads, [&] { got.push_back(backend->sum_squares(list)); });
  }
  EXPECT_NEAR(got[0], want, 1e-12 * want);
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
  EXPECT_EQ(backend->sum_squares({}), 0.0);
}

// The values of t multiplied by inv_scale in fp32 and stored in t's dtype.
std::vector<double> scaled(Backend& backend, const Tensor& t, const std::vector<double>& values,
                           float inv_scale) {
  std::vector<double> products;
  for (double x : values) products.push_back(static_cast<float>(x) * inv_scale);
  return values_of(backend, make_tensor(backend, t.shape(), t.dtype(), products));
}

// Runs unscale_and_check and checks that every tensor was scaled.
NonFiniteCheck unscale_and_verify(Backend& backend, const std::vector<Tensor>& list,
                                  float inv_scale) {
  std::vector<std::vector<double>> want;
  for (const Tensor& t : list) want.push_back(scaled(backend, t, values_of(backend, t), inv_scale));
  const NonFiniteCheck result = backend.unscale_and_check(list, inv_scale);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::vector<double> got = values_of(backend, list[i]);
    for (size_t k = 0; k < got.size(); ++k) {
      const bool same = std::isnan(want[i][k]) ? std::isnan(got[k]) : got[k] == want[i][k];
      if (!same) {
        ADD_FAILURE() << "tensor " << i << " element " << k << ": " << got[k]
                      << " != " << want[i][k];
        break;
      }
    }
  }
  return result;
}

// Puts `value` at `index` of list[tensor].
void poke(Backend& backend, std::vector<Tensor>& list, size_t tensor, size_t index, double value) {
  std::vector<double> v = values_of(backend, list[tensor]);
  v[index] = value;
  list[tensor] = make_tensor(backend, list[tensor].shape(), list[tensor].dtype(), v);
}

TEST(CpuUnscaleAndCheck, AllFiniteScalesEverythingAndFindsNothing) {
  auto backend = make_backend("cpu");
  const std::vector<Tensor> list = gradient_list(*backend);
  const NonFiniteCheck r = unscale_and_verify(*backend, list, 1.0f / 65536.0f);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.tensor_index, -1);
  EXPECT_FALSE(r.is_nan);
}

TEST(CpuUnscaleAndCheck, ReportsTheFirstTensorInListOrder) {
  auto backend = make_backend("cpu");
  std::vector<Tensor> list = gradient_list(*backend);
  poke(*backend, list, 2, 8500, kInf);  // tensor 2 (fp16): inf in its second chunk
  poke(*backend, list, 4, 0, kNan);     // tensor 4 (bf16): NaN
  poke(*backend, list, 5, 10, -kInf);   // tensor 5: -inf
  const NonFiniteCheck r = unscale_and_verify(*backend, list, 0.5f);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.tensor_index, 2);
  EXPECT_FALSE(r.is_nan);
}

TEST(CpuUnscaleAndCheck, IsNanFollowsTheFirstNonFiniteElementOfTheTensor) {
  auto backend = make_backend("cpu");
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // NaN before inf, in different chunks: NaN is reported.
    std::vector<Tensor> list = {make_tensor(*backend, {20000}, dtype, random_values(20000, 5))};
    poke(*backend, list, 0, 9000, kNan);
    poke(*backend, list, 0, 17000, kInf);
    NonFiniteCheck r = unscale_and_verify(*backend, list, 0.25f);
    EXPECT_TRUE(r.found);
    EXPECT_EQ(r.tensor_index, 0);
    EXPECT_TRUE(r.is_nan);
    // inf before NaN within one chunk: inf is reported.
    list = {make_tensor(*backend, {100}, dtype, random_values(100, 6))};
    poke(*backend, list, 0, 40, -kInf);
    poke(*backend, list, 0, 41, kNan);
    r = unscale_and_verify(*backend, list, 0.25f);
    EXPECT_TRUE(r.found);
    EXPECT_FALSE(r.is_nan);
  }
}

TEST(CpuUnscaleAndCheck, AProductThatOverflowsTheTensorsDtypeCountsAsInf) {
  auto backend = make_backend("cpu");
  // 40000 * 2 = 80000: finite in fp32, inf once stored as fp16.
  std::vector<Tensor> list = {make_tensor(*backend, {4}, DType::kF32, {1, 2, 40000, 4}),
                              make_tensor(*backend, {4}, DType::kF16, {1, 2, 40000, 4})};
  const NonFiniteCheck r = unscale_and_verify(*backend, list, 2.0f);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.tensor_index, 1);
  EXPECT_FALSE(r.is_nan);
  EXPECT_TRUE(std::isinf(values_of(*backend, list[1])[2]));
}

TEST(CpuMixedPrecision, NonFloatTensorsThrowNamingTheirPlace) {
  auto backend = make_backend("cpu");
  const std::vector<Tensor> list = {backend->zeros({4}, DType::kF32, MemoryCategory::kGrads),
                                    backend->zeros({4}, DType::kI32, MemoryCategory::kGrads)};
  EXPECT_TRUE(throws_invalid_argument([&] { backend->sum_squares(list); },
                                      {"sum_squares", "tensors[1]", "int32(4)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { backend->unscale_and_check(list, 1.0f); },
                                      {"unscale_and_check", "tensors[1]", "int32(4)"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
