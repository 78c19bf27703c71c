// Why: the optimizer step must follow torch.optim.AdamW, or parity runs
// against PyTorch drift apart. Several consecutive steps (bias correction
// changes with each) are compared with a double transcription of PyTorch's
// formula, with and without weight decay, with a gradient scale, with
// gradients in every dtype and the working copy of the weights written in
// every dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

struct AdamWState {
  std::vector<double> param, m, v;
};

// torch.optim.AdamW (single tensor), step t, on grad * grad_scale:
//   param *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
//   param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void ref_adamw_step(AdamWState& s, const std::vector<double>& grad, const AdamWConfig& c) {
  const double lr = c.lr;
  const double b1 = c.beta1;
  const double b2 = c.beta2;
  const double t = static_cast<double>(c.step);
  const double step_size = lr / (1.0 - std::pow(b1, t));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
  for (size_t i = 0; i < s.param.size(); ++i) {
    const double g = grad[i] * c.grad_scale;
    s.param[i] *= 1.0 - lr * c.weight_decay;
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g * g;
    s.param[i] -= step_size * s.m[i] / (std::sqrt(s.v[i]) / bias_correction2_sqrt + c.eps);
  }
}

// Crosses chunk boundaries.
constexpr int64_t kNumel = 2 * 4096 + 501;

struct Case {
  float weight_decay;
  float grad_scale;
  DType grad_type;
  DType param_out_type;  // kI32: no param_out
};

void run_steps(const Case& c) {
  auto backend = make_backend("cpu");
  const DType f32 = DType::kF32;
  Tensor master = make_tensor(*backend, {kNumel}, f32, random_values(kNumel, 1));
  Tensor m = backend->zeros({kNumel}, f32, MemoryCategory::kOptimizerState);
  Tensor v = backend->zeros({kNumel}, f32, MemoryCategory::kOptimizerState);
  const bool has_out = c.param_out_type != DType::kI32;
  Tensor param_out =
      has_out ? backend->empty({kNumel}, c.param_out_type, MemoryCategory::kParams) : Tensor();
  AdamWState want{values_of(*backend, master), std::vector<double>(kNumel, 0.0),
                  std::vector<double>(kNumel, 0.0)};
  AdamWConfig config;
  config.lr = 3e-3f;
  config.beta1 = 0.9f;
  config.beta2 = 0.95f;
  config.eps = 1e-8f;
  config.weight_decay = c.weight_decay;
  config.grad_scale = c.grad_scale;
  for (int64_t step = 1; step <= 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    config.step = step;
    // Gradients as a scaled loss would give them, some exactly zero.
    std::vector<double> g = random_values(kNumel, 10 + static_cast<uint32_t>(step), -2.0, 2.0);
    for (size_t i = 0; i < g.size(); i += 13) g[i] = 0.0;
    for (double& x : g) x /= c.grad_scale;
    Tensor grad = make_tensor(*backend, {kNumel}, c.grad_type, g);
    ref_adamw_step(want, values_of(*backend, grad), config);
    backend->adamw_update(master, m, v, grad, config, has_out ? &param_out : nullptr);
    EXPECT_TRUE(all_close(values_of(*backend, master), want.param, tolerance(f32)));
    EXPECT_TRUE(all_close(values_of(*backend, m), want.m, tolerance(f32)));
    EXPECT_TRUE(all_close(values_of(*backend, v), want.v, tolerance(f32)));
    if (has_out) {
      EXPECT_TRUE(
          all_close(values_of(*backend, param_out), want.param, tolerance(c.param_out_type)));
    }
  }
}

TEST(CpuAdamW, FollowsPyTorchOverSeveralSteps) {
  for (float weight_decay : {0.0f, 0.1f}) {
    SCOPED_TRACE("weight_decay " + std::to_string(weight_decay));
    run_steps({weight_decay, 1.0f, DType::kF32, DType::kI32});
  }
}

TEST(CpuAdamW, AppliesTheGradientScale) {
  run_steps({0.1f, 1.0f / 1024.0f, DType::kF32, DType::kF32});
}

TEST(CpuAdamW, ReadsGradientsAndWritesWeightsInEveryDtype) {
  for (DType grad_type : kFloatTypes) {
    for (DType out_type : kFloatTypes) {
      SCOPED_TRACE(std::string("grad ") + dtype_name(grad_type) + ", param_out " +
                   dtype_name(out_type));
      run_steps({0.1f, 1.0f, grad_type, out_type});
    }
  }
}

TEST(CpuAdamW, BadArgumentsThrowNamingTheTensor) {
  auto backend = make_backend("cpu");
  const DType f32 = DType::kF32;
  Tensor master = backend->zeros({8}, f32, MemoryCategory::kMasterParams);
  Tensor state = backend->zeros({8}, f32, MemoryCategory::kOptimizerState);
  Tensor bf16_state = backend->zeros({8}, DType::kBF16, MemoryCategory::kOptimizerState);
  Tensor short_grad = backend->zeros({7}, DType::kBF16, MemoryCategory::kGrads);
  AdamWConfig config;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->adamw_update(master, bf16_state, state, state, config, nullptr); },
      {"adamw_update", "m", "bf16(8)", "fp32"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->adamw_update(master, state, state, short_grad, config, nullptr); },
      {"adamw_update", "grad", "bf16(7)", "8 elements"}));
  config.step = 0;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->adamw_update(master, state, state, state, config, nullptr); },
      {"adamw_update", "step 0"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
