// Why: GELU runs on the largest activation of the model with a hand-made
// vectorizable tanh, so forward and backward are checked against libm's
// tanh in double over the whole useful input range (and beyond, where tanh
// saturates), the backward against finite differences, in every dtype mix,
// and NaN must stay NaN for the loss scaler to see it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

double ref_gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

double ref_gelu_grad(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<double> ref_gelu_forward(const std::vector<double>& inp) {
  std::vector<double> out;
  for (double x : inp) out.push_back(ref_gelu(x));
  return out;
}

// dinp + dout * GELU'(inp).
std::vector<double> ref_gelu_backward(std::vector<double> dinp, const std::vector<double>& dout,
                                      const std::vector<double>& inp) {
  for (size_t i = 0; i < inp.size(); ++i) dinp[i] += dout[i] * ref_gelu_grad(inp[i]);
  return dinp;
}

// Crosses chunk boundaries; inputs cover [-8, 8] plus points where tanh
// saturates.
constexpr int64_t kLong = 2 * 4096 + 77;

std::vector<double> gelu_inputs() {
  std::vector<double> v = random_values(kLong, 1, -8.0, 8.0);
  const double specials[] = {0.0, -0.0, 1e-6, -1e-6, 20.0, -20.0, 100.0, -100.0, 3.0, -3.0};
  for (size_t i = 0; i < std::size(specials); ++i) v[i * 97] = specials[i];
  return v;
}

TEST(CpuGelu, BackwardMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  const int64_t n = 200;
  const DType f32 = DType::kF32;
  const std::vector<double> inp =
      values_of(*backend, make_tensor(*backend, {n}, f32, random_values(n, 2, -5.0, 5.0)));
  const std::vector<double> probe =
      values_of(*backend, make_tensor(*backend, {n}, f32, random_values(n, 3)));
  const std::vector<double> fd = finite_differences(
      [&](const std::vector<double>& x) { return dot(ref_gelu_forward(x), probe); }, inp);
  EXPECT_TRUE(all_close(ref_gelu_backward(std::vector<double>(n, 0.0), probe, inp), fd,
                        kFiniteDifferenceTol));

  Tensor dinp = backend->zeros({n}, f32, MemoryCategory::kActivations);
  backend->gelu_backward(dinp, make_tensor(*backend, {n}, f32, probe),
                         make_tensor(*backend, {n}, f32, inp));
  EXPECT_TRUE(all_close(values_of(*backend, dinp), fd, kFp32VsFiniteDifferenceTol));
}

TEST(CpuGelu, ForwardMatchesReferenceForEveryDtypePair) {
  auto backend = make_backend("cpu");
  for (DType inp_type : kFloatTypes) {
    for (DType out_type : kFloatTypes) {
      SCOPED_TRACE(std::string("inp ") + dtype_name(inp_type) + ", out " + dtype_name(out_type));
      Tensor inp = make_tensor(*backend, {kLong}, inp_type, gelu_inputs());
      Tensor out = backend->empty({kLong}, out_type, MemoryCategory::kActivations);
      backend->gelu_forward(out, inp);
      EXPECT_TRUE(all_close(values_of(*backend, out), ref_gelu_forward(values_of(*backend, inp)),
                            tolerance(out_type)));
    }
  }
}

TEST(CpuGelu, BackwardAddsForEveryDtypeMix) {
  auto backend = make_backend("cpu");
  for (DType dinp_type : kFloatTypes) {
    for (DType dout_type : kFloatTypes) {
      for (DType inp_type : kFloatTypes) {
        SCOPED_TRACE(std::string("dinp ") + dtype_name(dinp_type) + ", dout " +
                     dtype_name(dout_type) + ", inp " + dtype_name(inp_type));
        Tensor inp = make_tensor(*backend, {kLong}, inp_type, gelu_inputs());
        Tensor dout = make_tensor(*backend, {kLong}, dout_type, random_values(kLong, 4));
        Tensor dinp = make_tensor(*backend, {kLong}, dinp_type, random_values(kLong, 5));
        const std::vector<double> want = ref_gelu_backward(
            values_of(*backend, dinp), values_of(*backend, dout), values_of(*backend, inp));
        backend->gelu_backward(dinp, dout, inp);
        EXPECT_TRUE(all_close(values_of(*backend, dinp), want, tolerance(dinp_type)));
      }
    }
  }
}

TEST(CpuGelu, InPlaceForwardAndNanPropagation) {
  auto backend = make_backend("cpu");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> values = gelu_inputs();
  values[5] = nan;
  Tensor x = make_tensor(*backend, {kLong}, DType::kF16, values);
  std::vector<double> want = ref_gelu_forward(values_of(*backend, x));
  backend->gelu_forward(x, x);
  const std::vector<double> got = values_of(*backend, x);
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_TRUE(all_close(got, want, tolerance(DType::kF16)));

  Tensor dinp = backend->zeros({kLong}, DType::kF32, MemoryCategory::kActivations);
  backend->gelu_backward(dinp, make_tensor(*backend, {kLong}, DType::kF32, random_values(kLong, 6)),
                         make_tensor(*backend, {kLong}, DType::kF32, values));
  EXPECT_TRUE(std::isnan(values_of(*backend, dinp)[5]));
}

TEST(CpuGelu, BadArgumentsThrowNamingTheTensor) {
  auto backend = make_backend("cpu");
  Tensor a = backend->zeros({16}, DType::kF32, MemoryCategory::kActivations);
  Tensor b = backend->zeros({15}, DType::kBF16, MemoryCategory::kActivations);
  Tensor ids = backend->zeros({16}, DType::kI32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->gelu_forward(a, b); },
                                      {"gelu_forward", "inp", "bf16(15)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { backend->gelu_backward(a, a, ids); },
                                      {"gelu_backward", "inp", "int32"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
