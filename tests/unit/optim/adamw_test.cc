// Why: adamw_step must hand every parameter to Backend::adamw_update with
// the right per-parameter weight decay, step and gradient scale (the
// update's arithmetic itself is compared with torch.optim.AdamW by the
// adamw_torch_parity test), and reject bad hyperparameters by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/optim/adamw.h"

namespace mixtrain {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNumel = 37;

std::vector<float> ramp(float start, float step) {
  std::vector<float> values(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) values[i] = start + step * static_cast<float>(i);
  return values;
}

Tensor fp32_tensor(Backend& backend, const std::vector<float>& values, MemoryCategory category) {
  Tensor t = backend.empty({static_cast<int64_t>(values.size())}, DType::kF32, category);
  backend.copy_from_host(t, values.data());
  return t;
}

std::vector<float> values_of(Backend& backend, const Tensor& t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.copy_to_host(values.data(), t);
  return values;
}

// A parameter with the given weights and gradient, fresh moments.
AdamWParam make_param(Backend& backend, const std::vector<float>& weights,
                      const std::vector<float>& grad, bool decay) {
  AdamWParam p;
  p.master = fp32_tensor(backend, weights, MemoryCategory::kMasterParams);
  p.m = backend.zeros({kNumel}, DType::kF32, MemoryCategory::kOptimizerState);
  p.v = backend.zeros({kNumel}, DType::kF32, MemoryCategory::kOptimizerState);
  p.grad = fp32_tensor(backend, grad, MemoryCategory::kGrads);
  p.decay = decay;
  return p;
}

TEST(AdamWStepTest, AppliesWeightDecayOnlyWhereAsked) {
  auto backend = make_backend("cpu");
  const std::vector<float> weights = ramp(-1.0f, 0.05f);
  const std::vector<float> grad = ramp(2.0f, -0.1f);
  AdamWConfig hyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  hyper.grad_scale = 1.0f / 1024.0f;
  std::vector<AdamWParam> params = {make_param(*backend, weights, grad, true),
                                    make_param(*backend, weights, grad, false)};
  // The same updates made directly on the backend.
  AdamWParam want_decay = make_param(*backend, weights, grad, true);
  AdamWParam want_plain = make_param(*backend, weights, grad, false);
  AdamWConfig config;
  config.lr = hyper.lr;
  config.beta1 = hyper.beta1;
  config.beta2 = hyper.beta2;
  config.eps = hyper.eps;
  config.grad_scale = hyper.grad_scale;
  for (int64_t step = 1; step <= 3; ++step) {
    hyper.step = step;
    adamw_step(*backend, params, hyper);
    config.step = step;
    config.weight_decay = hyper.weight_decay;
    backend->adamw_update(want_decay.master, want_decay.m, want_decay.v, want_decay.grad,
                          config, nullptr);
    config.weight_decay = 0.0f;
    backend->adamw_update(want_plain.master, want_plain.m, want_plain.v, want_plain.grad,
                          config, nullptr);
  }
  EXPECT_EQ(values_of(*backend, params[0].master), values_of(*backend, want_decay.master));
  EXPECT_EQ(values_of(*backend, params[0].v), values_of(*backend, want_decay.v));
  EXPECT_EQ(values_of(*backend, params[1].master), values_of(*backend, want_plain.master));
  EXPECT_EQ(values_of(*backend, params[1].m), values_of(*backend, want_plain.m));
  // Decay made a difference, so the test can tell the two apart.
  EXPECT_NE(values_of(*backend, params[0].master), values_of(*backend, params[1].master));
}

TEST(AdamWStepTest, WritesTheComputeCopyWhenGiven) {
  auto backend = make_backend("cpu");
  std::vector<AdamWParam> params = {make_param(*backend, ramp(0.5f, 0.01f), ramp(1.0f, 0.0f), true)};
  params[0].param_out = backend->empty({kNumel}, DType::kBF16, MemoryCategory::kParams);
  adamw_step(*backend, params, AdamWConfig{});
  Tensor want = backend->empty({kNumel}, DType::kBF16, MemoryCategory::kWorkspace);
  backend->cast(want, params[0].master);
  Tensor got_f32 = backend->empty({kNumel}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor want_f32 = backend->empty({kNumel}, DType::kF32, MemoryCategory::kWorkspace);
  backend->cast(got_f32, params[0].param_out);
  backend->cast(want_f32, want);
  EXPECT_EQ(values_of(*backend, got_f32), values_of(*backend, want_f32));
}

TEST(AdamWStepTest, ShapeErrorNamesTheParameter) {
  auto backend = make_backend("cpu");
  std::vector<AdamWParam> params = {make_param(*backend, ramp(0.0f, 1.0f), ramp(0.0f, 1.0f), true),
                                    make_param(*backend, ramp(0.0f, 1.0f), ramp(0.0f, 1.0f), true)};
  params[1].v = backend->zeros({kNumel + 1}, DType::kF32, MemoryCategory::kOptimizerState);
  try {
    adamw_step(*backend, params, AdamWConfig{});
    FAIL() << "no error";
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("parameter 1"), std::string::npos) << error.what();
  }
}

TEST(AdamWStepTest, RejectsBadHyperparameters) {
  auto backend = make_backend("cpu");
  const std::vector<AdamWParam> none;
  // The error of a step whose config `bad` changed from the defaults.
  const auto error_of = [&](auto bad) -> std::string {
    AdamWConfig config;
    bad(config);
    try {
      adamw_step(*backend, none, config);
    } catch (const EngineError& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_EQ(error_of([](AdamWConfig&) {}), "");
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.lr = -1e-3f; }), HasSubstr("lr"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.beta1 = 1.0f; }), HasSubstr("beta1"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.beta2 = -0.1f; }), HasSubstr("beta2"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.eps = -1.0f; }), HasSubstr("eps"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.weight_decay = -0.1f; }), HasSubstr("weight_decay"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.step = 0; }), HasSubstr("step"));
  EXPECT_THAT(error_of([](AdamWConfig& c) { c.grad_scale = INFINITY; }), HasSubstr("grad_scale"));
}

}  // namespace
}  // namespace mixtrain
