// Why: LayerNorm's backward is the densest formula of the model and its
// weight/bias gradients are cross-thread reductions, so the double
// reference backward is first checked against finite differences of the
// double forward, then the op against that reference in every mix of
// activation, parameter and gradient dtypes, and the reduction for
// identical bits across thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

constexpr double kEps = 1e-5;

struct LayerNormForward {
  std::vector<double> out, mean, rstd;
};

// out (N,C) = (x - mean) * rstd * weight + bias, biased variance.
LayerNormForward ref_layernorm_forward(const std::vector<double>& inp,
                                       const std::vector<double>& weight,
                                       const std::vector<double>& bias, int64_t channels) {
  const int64_t rows = static_cast<int64_t>(inp.size()) / channels;
  LayerNormForward f{std::vector<double>(inp.size()), std::vector<double>(rows),
                     std::vector<double>(rows)};
  for (int64_t n = 0; n < rows; ++n) {
    const double* x = &inp[n * channels];
    double mean = 0.0;
    for (int64_t c = 0; c < channels; ++c) mean += x[c];
    mean /= static_cast<double>(channels);
    double var = 0.0;
    for (int64_t c = 0; c < channels; ++c) var += (x[c] - mean) * (x[c] - mean);
    var /= static_cast<double>(channels);
    const double rstd = 1.0 / std::sqrt(var + kEps);
    for (int64_t c = 0; c < channels; ++c) {
      f.out[n * channels + c] = (x[c] - mean) * rstd * weight[c] + bias[c];
    }
    f.mean[n] = mean;
    f.rstd[n] = rstd;
  }
  return f;
}

struct LayerNormGrads {
  std::vector<double> dinp, dweight, dbias;
};

// Adds the gradients of <out, dout> into grads (analytic formula).
void ref_layernorm_backward(LayerNormGrads& grads, const std::vector<double>& dout,
                            const std::vector<double>& inp, const std::vector<double>& weight,
                            int64_t channels) {
  // Only the mean and rstd of the forward are used (they ignore weight and bias).
  const LayerNormForward f = ref_layernorm_forward(inp, weight, weight, channels);
  const int64_t rows = static_cast<int64_t>(inp.size()) / channels;
  for (int64_t n = 0; n < rows; ++n) {
    const double* x = &inp[n * channels];
    const double* dy = &dout[n * channels];
    double dnorm_mean = 0.0;
    double dnorm_norm_mean = 0.0;
    for (int64_t c = 0; c < channels; ++c) {
      const double norm = (x[c] - f.mean[n]) * f.rstd[n];
      dnorm_mean += weight[c] * dy[c];
      dnorm_norm_mean += weight[c] * dy[c] * norm;
    }
    dnorm_mean /= static_cast<double>(channels);
    dnorm_norm_mean /= static_cast<double>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const double norm = (x[c] - f.mean[n]) * f.rstd[n];
      grads.dbias[c] += dy[c];
      grads.dweight[c] += norm * dy[c];
      grads.dinp[n * channels + c] +=
          (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean) * f.rstd[n];
    }
  }
}

constexpr int64_t kRows = 6;
constexpr int64_t kChannels = 40;

// Inputs with a per-row offset and spread, as residual streams have.
std::vector<double> layernorm_inputs(int64_t rows, int64_t channels, uint32_t seed) {
  std::vector<double> v = random_values(rows * channels, seed, -2.0, 2.0);
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      v[n * channels + c] = 0.5 * static_cast<double>(n) + (1.0 + 0.3 * n) * v[n * channels + c];
    }
  }
  return v;
}

TEST(CpuLayerNorm, BackwardMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  auto as_fp32 = [&](const std::vector<double>& v) {
    return values_of(*backend,
                     make_tensor(*backend, {static_cast<int64_t>(v.size())}, DType::kF32, v));
  };
  const std::vector<double> inp = as_fp32(layernorm_inputs(kRows, kChannels, 1));
  const std::vector<double> weight = as_fp32(random_values(kChannels, 2, 0.5, 1.5));
  const std::vector<double> bias = as_fp32(random_values(kChannels, 3));
  const std::vector<double> probe = as_fp32(random_values(kRows * kChannels, 4));

  // L = <forward(inp, weight, bias), probe>: its gradients are the backward
  // with dout = probe.
  const std::vector<double> fd_inp = finite_differences(
      [&](const std::vector<double>& x) {
        return dot(ref_layernorm_forward(x, weight, bias, kChannels).out, probe);
      },
      inp);
  const std::vector<double> fd_weight = finite_differences(
      [&](const std::vector<double>& w) {
        return dot(ref_layernorm_forward(inp, w, bias, kChannels).out, probe);
      },
      weight);
  const std::vector<double> fd_bias = finite_differences(
      [&](const std::vector<double>& b) {
        return dot(ref_layernorm_forward(inp, weight, b, kChannels).out, probe);
      },
      bias);

  LayerNormGrads ref{std::vector<double>(inp.size()), std::vector<double>(kChannels),
                     std::vector<double>(kChannels)};
  ref_layernorm_backward(ref, probe, inp, weight, kChannels);
  EXPECT_TRUE(all_close(ref.dinp, fd_inp, kFiniteDifferenceTol));
  EXPECT_TRUE(all_close(ref.dweight, fd_weight, kFiniteDifferenceTol));
  EXPECT_TRUE(all_close(ref.dbias, fd_bias, kFiniteDifferenceTol));

  const DType f32 = DType::kF32;
  Tensor inp_t = make_tensor(*backend, {kRows, kChannels}, f32, inp);
  Tensor weight_t = make_tensor(*backend, {kChannels}, f32, weight);
  Tensor out = backend->empty({kRows, kChannels}, f32, MemoryCategory::kActivations);
  Tensor mean = backend->empty({kRows}, f32, MemoryCategory::kActivations);
  Tensor rstd = backend->empty({kRows}, f32, MemoryCategory::kActivations);
  backend->layernorm_forward(out, mean, rstd, inp_t, weight_t,
                             make_tensor(*backend, {kChannels}, f32, bias));
  Tensor dinp = backend->zeros({kRows, kChannels}, f32, MemoryCategory::kActivations);
  Tensor dweight = backend->zeros({kChannels}, f32, MemoryCategory::kGrads);
  Tensor dbias = backend->zeros({kChannels}, f32, MemoryCategory::kGrads);
  backend->layernorm_backward(dinp, dweight, dbias,
                              make_tensor(*backend, {kRows, kChannels}, f32, probe), inp_t,
                              weight_t, mean, rstd);
  EXPECT_TRUE(all_close(values_of(*backend, dinp), fd_inp, kFp32VsFiniteDifferenceTol));
  EXPECT_TRUE(all_close(values_of(*backend, dweight), fd_weight, kFp32VsFiniteDifferenceTol));
  EXPECT_TRUE(all_close(values_of(*backend, dbias), fd_bias, kFp32VsFiniteDifferenceTol));
}

TEST(CpuLayerNorm, ForwardMatchesReferenceForEveryDtypeMix) {
  auto backend = make_backend("cpu");
  for (DType inp_type : kFloatTypes) {
    for (DType out_type : kFloatTypes) {
      for (DType param_type : kFloatTypes) {
        SCOPED_TRACE(std::string("inp ") + dtype_name(inp_type) + ", out " + dtype_name(out_type) +
                     ", weight/bias " + dtype_name(param_type));
        Tensor inp = make_tensor(*backend, {2, kRows / 2, kChannels}, inp_type,
                                 layernorm_inputs(kRows, kChannels, 5));
        Tensor weight =
            make_tensor(*backend, {kChannels}, param_type, random_values(kChannels, 6, 0.5, 1.5));
        Tensor bias = make_tensor(*backend, {kChannels}, param_type, random_values(kChannels, 7));
        Tensor out =
            backend->empty({2, kRows / 2, kChannels}, out_type, MemoryCategory::kActivations);
        Tensor mean = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
        Tensor rstd = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
        backend->layernorm_forward(out, mean, rstd, inp, weight, bias);
        const LayerNormForward want =
            ref_layernorm_forward(values_of(*backend, inp), values_of(*backend, weight),
                                  values_of(*backend, bias), kChannels);
        EXPECT_TRUE(all_close(values_of(*backend, out), want.out, tolerance(out_type)));
        EXPECT_TRUE(all_close(values_of(*backend, mean), want.mean, tolerance(DType::kF32)));
        EXPECT_TRUE(all_close(values_of(*backend, rstd), want.rstd, tolerance(DType::kF32)));
      }
    }
  }
}

TEST(CpuLayerNorm, ForwardMayWriteOverItsInput) {
  auto backend = make_backend("cpu");
  Tensor x = make_tensor(*backend, {kRows, kChannels}, DType::kBF16,
                         layernorm_inputs(kRows, kChannels, 8));
  Tensor weight = make_tensor(*backend, {kChannels}, DType::kF32, random_values(kChannels, 9));
  Tensor bias = make_tensor(*backend, {kChannels}, DType::kF32, random_values(kChannels, 10));
  const LayerNormForward want = ref_layernorm_forward(
      values_of(*backend, x), values_of(*backend, weight), values_of(*backend, bias), kChannels);
  Tensor mean = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
  Tensor rstd = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
  backend->layernorm_forward(x, mean, rstd, x, weight, bias);
  EXPECT_TRUE(all_close(values_of(*backend, x), want.out, tolerance(DType::kBF16)));
}

// Runs the op's forward then backward with nonzero gradients to add into,
// and checks every gradient against the reference.
void check_backward(Backend& backend, DType act_type, DType param_type, DType grad_type,
                    int64_t rows, int64_t channels) {
  Tensor inp =
      make_tensor(backend, {rows, channels}, act_type, layernorm_inputs(rows, channels, 11));
  Tensor weight =
      make_tensor(backend, {channels}, param_type, random_values(channels, 12, 0.5, 1.5));
  Tensor bias = make_tensor(backend, {channels}, param_type, random_values(channels, 13));
  Tensor dout =
      make_tensor(backend, {rows, channels}, act_type, random_values(rows * channels, 14));
  Tensor dinp =
      make_tensor(backend, {rows, channels}, act_type, random_values(rows * channels, 15));
  Tensor dweight = make_tensor(backend, {channels}, grad_type, random_values(channels, 16));
  Tensor dbias = make_tensor(backend, {channels}, grad_type, random_values(channels, 17));
  Tensor out = backend.empty({rows, channels}, act_type, MemoryCategory::kActivations);
  Tensor mean = backend.empty({rows}, DType::kF32, MemoryCategory::kActivations);
  Tensor rstd = backend.empty({rows}, DType::kF32, MemoryCategory::kActivations);
  backend.layernorm_forward(out, mean, rstd, inp, weight, bias);

  LayerNormGrads want{values_of(backend, dinp), values_of(backend, dweight),
                      values_of(backend, dbias)};
  ref_layernorm_backward(want, values_of(backend, dout), values_of(backend, inp),
                         values_of(backend, weight), channels);
  backend.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
  EXPECT_TRUE(all_close(values_of(backend, dinp), want.dinp, tolerance(act_type)));
  EXPECT_TRUE(all_close(values_of(backend, dweight), want.dweight, tolerance(grad_type)));
  EXPECT_TRUE(all_close(values_of(backend, dbias), want.dbias, tolerance(grad_type)));
}

TEST(CpuLayerNorm, BackwardAddsGradientsForEveryDtypeMix) {
  auto backend = make_backend("cpu");
  for (DType act_type : kFloatTypes) {
    for (DType param_type : kFloatTypes) {
      for (DType grad_type : kFloatTypes) {
        SCOPED_TRACE(std::string("activations ") + dtype_name(act_type) + ", weight " +
                     dtype_name(param_type) + ", dweight/dbias " + dtype_name(grad_type));
        check_backward(*backend, act_type, param_type, grad_type, kRows, kChannels);
      }
    }
  }
}

TEST(CpuLayerNorm, BackwardOverManyRowBlocks) {
  auto backend = make_backend("cpu");
  // 1000 rows make 125 blocks of 8 for the weight/bias sums.
  check_backward(*backend, DType::kF32, DType::kF32, DType::kF32, 1000, 96);
  check_backward(*backend, DType::kBF16, DType::kBF16, DType::kF32, 1000, 96);
}

TEST(CpuLayerNorm, BackwardBitsDoNotDependOnTheThreadCount) {
  auto backend = make_backend("cpu");
  const int64_t rows = 777;
  const int64_t channels = 64;
  const DType f32 = DType::kF32;
  Tensor inp = make_tensor(*backend, {rows, channels}, f32, layernorm_inputs(rows, channels, 18));
  Tensor weight = make_tensor(*backend, {channels}, f32, random_values(channels, 19));
  Tensor bias = make_tensor(*backend, {channels}, f32, random_values(channels, 20));
  Tensor dout = make_tensor(*backend, {rows, channels}, f32, random_values(rows * channels, 21));
  Tensor out = backend->empty({rows, channels}, f32, MemoryCategory::kActivations);
  Tensor mean = backend->empty({rows}, f32, MemoryCategory::kActivations);
  Tensor rstd = backend->empty({rows}, f32, MemoryCategory::kActivations);
  backend->layernorm_forward(out, mean, rstd, inp, weight, bias);
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    Tensor dinp = backend->zeros({rows, channels}, f32, MemoryCategory::kActivations);
    Tensor dweight = backend->zeros({channels}, f32, MemoryCategory::kGrads);
    Tensor dbias = backend->zeros({channels}, f32, MemoryCategory::kGrads);
    with_threads(threads, [&] {
      backend->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
    });
    std::vector<double> all = values_of(*backend, dinp);
    for (const Tensor* t : {&dweight, &dbias}) {
      const std::vector<double> v = values_of(*backend, *t);
      all.insert(all.end(), v.begin(), v.end());
    }
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(CpuLayerNorm, ScratchIsCountedAsWorkspaceAndReleased) {
  auto backend = make_backend("cpu");
  backend->memory().reset_peaks();
  check_backward(*backend, DType::kBF16, DType::kBF16, DType::kBF16, 64, 32);
  EXPECT_GT(backend->memory().peak(MemoryPool::kDevice, MemoryCategory::kWorkspace), 0u);
  EXPECT_EQ(backend->memory().current(MemoryPool::kDevice, MemoryCategory::kWorkspace), 0u);
}

TEST(CpuLayerNorm, BadArgumentsThrowNamingTheTensor) {
  auto backend = make_backend("cpu");
  const DType f32 = DType::kF32;
  Tensor inp = backend->zeros({4, 8}, f32, MemoryCategory::kActivations);
  Tensor out = backend->zeros({4, 8}, f32, MemoryCategory::kActivations);
  Tensor stat = backend->zeros({4}, f32, MemoryCategory::kActivations);
  Tensor weight = backend->zeros({8}, f32, MemoryCategory::kParams);
  Tensor short_weight = backend->zeros({7}, f32, MemoryCategory::kParams);
  Tensor bf16_stat = backend->zeros({4}, DType::kBF16, MemoryCategory::kActivations);
  Tensor wide = backend->zeros({4, 9}, f32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->layernorm_forward(out, stat, stat, inp, short_weight, weight); },
      {"layernorm_forward", "weight", "fp32(7)", "8 elements"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->layernorm_forward(out, bf16_stat, stat, inp, weight, weight); },
      {"layernorm_forward", "mean", "bf16(4)", "fp32"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->layernorm_backward(out, weight, weight, wide, inp, weight, stat, stat); },
      {"layernorm_backward", "dout", "fp32(4, 9)"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
