// Why: RMSNorm (Llama's normalization) forward and backward on the CPU
// against a double reference, whose backward is first checked against
// finite differences of its forward; every mix of activation, weight and
// gradient dtype; the weight gradient's reduction bit-identical across
// thread counts, as LayerNorm's (they share the row loops).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "engine/backend/backend.h"

namespace mixtrain::backend_test {
namespace {

constexpr double kEps = 1e-5;
constexpr int64_t kRows = 6;
constexpr int64_t kChannels = 40;

struct RmsNormForward {
  std::vector<double> out, rstd;
};

// out (N,C) = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps).
RmsNormForward ref_rmsnorm_forward(const std::vector<double>& inp,
                                   const std::vector<double>& weight, int64_t channels) {
  const int64_t rows = static_cast<int64_t>(inp.size()) / channels;
  RmsNormForward f{std::vector<double>(inp.size()), std::vector<double>(rows)};
  for (int64_t n = 0; n < rows; ++n) {
    const double* x = &inp[n * channels];
    double squares = 0.0;
    for (int64_t c = 0; c < channels; ++c) squares += x[c] * x[c];
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(channels) + kEps);
    for (int64_t c = 0; c < channels; ++c) f.out[n * channels + c] = x[c] * rstd * weight[c];
    f.rstd[n] = rstd;
  }
  return f;
}

struct RmsNormGrads {
  std::vector<double> dinp, dweight;
};

// Adds the gradients of <out, dout> into grads: with norm = x * rstd and
// dnorm = weight * dout, dx = rstd * (dnorm - norm * mean(dnorm * norm)).
void ref_rmsnorm_backward(RmsNormGrads& grads, const std::vector<double>& dout,
                          const std::vector<double>& inp, const std::vector<double>& weight,
                          int64_t channels) {
  const RmsNormForward f = ref_rmsnorm_forward(inp, weight, channels);
  const int64_t rows = static_cast<int64_t>(inp.size()) / channels;
  for (int64_t n = 0; n < rows; ++n) {
    const double* x = &inp[n * channels];
    const double* dy = &dout[n * channels];
    double dnorm_norm_mean = 0.0;
    for (int64_t c = 0; c < channels; ++c) dnorm_norm_mean += weight[c] * dy[c] * x[c] * f.rstd[n];
    dnorm_norm_mean /= static_cast<double>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const double norm = x[c] * f.rstd[n];
      grads.dweight[c] += norm * dy[c];
      grads.dinp[n * channels + c] += (weight[c] * dy[c] - norm * dnorm_norm_mean) * f.rstd[n];
    }
  }
}

// Inputs with a per-row offset and spread, as residual streams have.
std::vector<double> rmsnorm_inputs(int64_t rows, int64_t channels, uint32_t seed) {
  std::vector<double> v = random_values(rows * channels, seed, -2.0, 2.0);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < channels; ++c)
      v[n * channels + c] = 0.5 * static_cast<double>(n) + (1.0 + 0.3 * n) * v[n * channels + c];
  return v;
}

TEST(CpuRmsNorm, ReferenceBackwardMatchesFiniteDifferences) {
  const std::vector<double> inp = rmsnorm_inputs(kRows, kChannels, 1);
  const std::vector<double> weight = random_values(kChannels, 2, 0.5, 1.5);
  const std::vector<double> probe = random_values(kRows * kChannels, 4);
  // L = <forward(inp, weight), probe>: its gradients are the backward with
  // dout = probe.
  const std::vector<double> fd_inp = finite_differences(
      [&](const std::vector<double>& x) {
        return dot(ref_rmsnorm_forward(x, weight, kChannels).out, probe);
      },
      inp);
  const std::vector<double> fd_weight = finite_differences(
      [&](const std::vector<double>& w) {
        return dot(ref_rmsnorm_forward(inp, w, kChannels).out, probe);
      },
      weight);
  RmsNormGrads ref{std::vector<double>(inp.size()), std::vector<double>(kChannels)};
  ref_rmsnorm_backward(ref, probe, inp, weight, kChannels);
  EXPECT_TRUE(all_close(ref.dinp, fd_inp, kFiniteDifferenceTol));
  EXPECT_TRUE(all_close(ref.dweight, fd_weight, kFiniteDifferenceTol));
}

// Forward then backward with nonzero gradients to add into, every result
// against the reference, for one mix of dtypes.
void check_rmsnorm(Backend& backend, DType act_type, DType param_type, DType grad_type,
                   int64_t rows, int64_t channels) {
  const Tensor inp =
      make_tensor(backend, {rows, channels}, act_type, rmsnorm_inputs(rows, channels, 11));
  const Tensor weight =
      make_tensor(backend, {channels}, param_type, random_values(channels, 12, 0.5, 1.5));
  const Tensor dout =
      make_tensor(backend, {rows, channels}, act_type, random_values(rows * channels, 14));
  const Tensor dinp =
      make_tensor(backend, {rows, channels}, act_type, random_values(rows * channels, 15));
  const Tensor dweight = make_tensor(backend, {channels}, grad_type, random_values(channels, 16));
  const Tensor out = backend.empty({rows, channels}, act_type, MemoryCategory::kActivations);
  const Tensor rstd = backend.empty({rows}, DType::kF32, MemoryCategory::kActivations);
  backend.rmsnorm_forward(out, rstd, inp, weight);
  const RmsNormForward want_forward =
      ref_rmsnorm_forward(values_of(backend, inp), values_of(backend, weight), channels);
  EXPECT_TRUE(all_close(values_of(backend, out), want_forward.out, tolerance(act_type)));
  EXPECT_TRUE(all_close(values_of(backend, rstd), want_forward.rstd, tolerance(DType::kF32)));

  RmsNormGrads want{values_of(backend, dinp), values_of(backend, dweight)};
  ref_rmsnorm_backward(want, values_of(backend, dout), values_of(backend, inp),
                       values_of(backend, weight), channels);
  backend.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd);
  EXPECT_TRUE(all_close(values_of(backend, dinp), want.dinp, tolerance(act_type)));
  EXPECT_TRUE(all_close(values_of(backend, dweight), want.dweight, tolerance(grad_type)));
}

TEST(CpuRmsNorm, ForwardAndBackwardForEveryDtypeMix) {
  auto backend = make_backend("cpu");
  for (DType act_type : kFloatTypes) {
    for (DType param_type : kFloatTypes) {
      for (DType grad_type : kFloatTypes) {
        SCOPED_TRACE(std::string("activations ") + dtype_name(act_type) + ", weight " +
                     dtype_name(param_type) + ", dweight " + dtype_name(grad_type));
        check_rmsnorm(*backend, act_type, param_type, grad_type, kRows, kChannels);
      }
    }
  }
}

TEST(CpuRmsNorm, WeightGradientOverManyRowBlocksIsTheSameForAnyThreadCount) {
  // 1000 rows make 125 blocks of 8 for the weight gradient's sums.
  std::vector<double> first;
  for (int threads : {1, 2, 3}) {
    with_threads(threads, [&] {
      auto backend = make_backend("cpu");
      const Tensor inp =
          make_tensor(*backend, {1000, 24}, DType::kF32, rmsnorm_inputs(1000, 24, 3));
      const Tensor weight = make_tensor(*backend, {24}, DType::kF32, random_values(24, 4));
      const Tensor dout = make_tensor(*backend, {1000, 24}, DType::kF32, random_values(24000, 5));
      const Tensor out = backend->empty({1000, 24}, DType::kF32, MemoryCategory::kActivations);
      const Tensor rstd = backend->empty({1000}, DType::kF32, MemoryCategory::kActivations);
      const Tensor dinp = backend->zeros({1000, 24}, DType::kF32, MemoryCategory::kActivations);
      const Tensor dweight = backend->zeros({24}, DType::kF32, MemoryCategory::kGrads);
      backend->rmsnorm_forward(out, rstd, inp, weight);
      backend->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd);
      const std::vector<double> got = values_of(*backend, dweight);
      if (first.empty()) first = got;
      EXPECT_EQ(got, first) << threads << " threads";
    });
  }
}

}  // namespace
}  // namespace mixtrain::backend_test
