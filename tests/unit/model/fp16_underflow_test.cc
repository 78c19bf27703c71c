// Why: the reason loss scaling exists (Micikevicius et al., 2018): small
// gradients fall below fp16's smallest subnormal (2^-24) and become zero.
// Here a loss weighted by 2^-14 (as a long gradient accumulation or a tiny
// loss term gives) is backpropagated in fp16 two ways against an fp32
// reference on the same weights and batch: unscaled, most nonzero gradient
// entries flush to zero; scaled by 2^16 (the dynamic scaler's initial
// scale) and unscaled in fp32 afterwards, almost none do and the gradients
// match fp32. The gradient-range telemetry (precision.stats_every) shows
// it: most stored fp16 gradients zero or subnormal unscaled, almost none
// scaled. The measured fractions are printed and recorded. Then the
// same weighted loss is trained: with loss_scale none fp16 learns far less,
// with the dynamic scaler it follows fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/amp/loss_scaler.h"
#include "engine/model/gpt_init.h"
#include "engine/model/parameter_layout.h"
#include "engine/optim/adamw.h"
#include "engine/train/gradient_range.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

constexpr float kLossWeight = 1.0f / 16384.0f;  // 2^-14
constexpr float kLossScale = 65536.0f;           // GradScaler's init_scale

// Gradients of kLossWeight * loss * scale, in `compute` with grads of the
// same dtype, read back as fp32 and divided by `scale` in fp32; `range`,
// when given, gets the telemetry's view of them as stored.
std::vector<float> gradients(Backend& backend, const GptConfig& config,
                             const std::vector<float>& weights, DType compute, float scale,
                             const Tensor& tokens, const Tensor& targets,
                             GradientRange* range = nullptr) {
  Gpt gpt(backend, config, compute, compute);
  const Tensor params = make_flat(backend, weights, compute, MemoryCategory::kParams);
  const Tensor grads = make_grads(backend, gpt.layout().numel(), compute);
  gpt.forward(params, tokens, targets);
  gpt.backward(params, grads, kLossWeight * scale);
  if (range != nullptr) {
    std::vector<Tensor> views;
    std::vector<size_t> parameters;
    for (size_t i = 0; i < gpt.layout().parameters().size(); ++i) {
      views.push_back(parameter_view(grads, gpt.layout().parameters()[i]));
      parameters.push_back(i);
    }
    *range = measure_gradient_range(backend, gpt.layout(), views, parameters, 1);
  }
  std::vector<float> values = to_host(backend, grads);
  for (float& v : values) v /= scale;
  return values;
}

// Fraction of the entries that are nonzero in `reference` but zero in `grads`.
double zeroed_fraction(const std::vector<float>& reference, const std::vector<float>& grads) {
  int64_t nonzero = 0, zeroed = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (reference[i] == 0.0f) continue;
    ++nonzero;
    if (grads[i] == 0.0f) ++zeroed;
  }
  return nonzero ? static_cast<double>(zeroed) / static_cast<double>(nonzero) : 0.0;
}

// max |a - b| / max |b|.
double max_norm_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return err / scale;
}

TEST(Fp16Underflow, LossScalingKeepsGradientsThatFp16WouldFlushToZero) {
  auto backend = make_backend("cpu");
  const GptConfig config{2, 4, 64, 32, 256};
  const ParameterLayout layout(config);
  const std::vector<float> weights = gpt2_init(layout, config, 1337);
  const Tensor tokens = random_ids(*backend, 4, 32, 256, 1);
  const Tensor targets = random_ids(*backend, 4, 32, 256, 2);

  const auto fp32 = gradients(*backend, config, weights, DType::kF32, 1.0f, tokens, targets);
  GradientRange unscaled_range, scaled_range;
  const auto unscaled =
      gradients(*backend, config, weights, DType::kF16, 1.0f, tokens, targets, &unscaled_range);
  const auto scaled =
      gradients(*backend, config, weights, DType::kF16, kLossScale, tokens, targets, &scaled_range);

  const double zeroed_unscaled = zeroed_fraction(fp32, unscaled);
  const double zeroed_scaled = zeroed_fraction(fp32, scaled);
  std::printf("fp16 gradients zeroed by underflow: %.1f%% without loss scaling, %.3f%% with 2^16\n",
              100.0 * zeroed_unscaled, 100.0 * zeroed_scaled);
  ::testing::Test::RecordProperty("zeroed_percent_unscaled",
                                  std::to_string(100.0 * zeroed_unscaled));
  ::testing::Test::RecordProperty("zeroed_percent_scaled", std::to_string(100.0 * zeroed_scaled));

  EXPECT_GT(zeroed_unscaled, 0.5) << "fp16 without scaling should lose most gradient entries";
  EXPECT_LT(zeroed_scaled, 0.01) << "loss scaling should keep them";
  EXPECT_LT(max_norm_error(scaled, fp32), 0.05) << "scaled fp16 gradients should match fp32";
  EXPECT_GT(max_norm_error(unscaled, fp32), 0.05) << "unscaled fp16 gradients should not";

  // What mixtrain_gradient_zero_ratio and _subnormal_ratio report.
  std::printf(
      "gradient range, fp16: zero %.1f%% subnormal %.1f%% headroom 2^%.1f unscaled; "
      "zero %.3f%% subnormal %.3f%% headroom 2^%.1f with 2^16\n",
      100 * unscaled_range.zero_ratio(), 100 * unscaled_range.subnormal_ratio(),
      unscaled_range.headroom_log2(), 100 * scaled_range.zero_ratio(),
      100 * scaled_range.subnormal_ratio(), scaled_range.headroom_log2());
  // (Measured: 81.6% zero + 18.4% subnormal unscaled; 0.018% + 5.6% scaled.)
  EXPECT_GT(unscaled_range.zero_ratio(), 0.5);
  EXPECT_GT(unscaled_range.zero_ratio() + unscaled_range.subnormal_ratio(), 0.95);
  EXPECT_LT(scaled_range.zero_ratio(), 0.001);
  EXPECT_LT(scaled_range.subnormal_ratio(), 0.1);
  EXPECT_EQ(unscaled_range.dtype, DType::kF16);
  // Scaling by 2^16 spends at least 16 doublings of headroom (more: the
  // unscaled run's largest gradients were themselves cut by underflow).
  EXPECT_GT(unscaled_range.headroom_log2() - scaled_range.headroom_log2(), 15.5);
}

// The loss after each of `steps` AdamW steps on one fixed batch, training
// kLossWeight * loss in `compute` with the scaler in `mode`, the way the
// trainer does: gradients stay scaled in the compute dtype, a step with
// inf/NaN is skipped, and AdamW unscales in fp32 (grad_scale 1/scale).
std::vector<float> train_losses(Backend& backend, const GptConfig& config,
                                const std::vector<float>& weights, DType compute,
                                LossScaleMode mode, int steps, const Tensor& tokens,
                                const Tensor& targets) {
  Gpt gpt(backend, config, compute, compute);
  const ParameterLayout& layout = gpt.layout();
  const Tensor master = make_flat(backend, weights, DType::kF32, MemoryCategory::kMasterParams);
  const Tensor params = compute == DType::kF32
                            ? master
                            : make_flat(backend, weights, compute, MemoryCategory::kParams);
  const Tensor grads = make_grads(backend, layout.numel(), compute);
  const Tensor m = backend.zeros({layout.numel()}, DType::kF32, MemoryCategory::kOptimizerState);
  const Tensor v = backend.zeros({layout.numel()}, DType::kF32, MemoryCategory::kOptimizerState);
  std::vector<AdamWParam> adam;
  for (const ParameterInfo& info : layout.parameters()) {
    AdamWParam p{parameter_view(master, info), parameter_view(m, info), parameter_view(v, info),
                 parameter_view(grads, info), Tensor(), info.decay};
    if (compute != DType::kF32) p.param_out = parameter_view(params, info);
    adam.push_back(p);
  }
  LossScalerConfig scaler_config;
  scaler_config.mode = mode;
  LossScaler scaler(scaler_config);
  AdamWConfig hyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f};
  std::vector<float> losses;
  int64_t applied = 0;
  for (int step = 1; step <= steps; ++step) {
    const float scale = scaler.scale();
    backend.set_zero(grads);
    losses.push_back(gpt.forward(params, tokens, targets));
    gpt.backward(params, grads, kLossWeight * scale);
    const bool overflow = backend.unscale_and_check(std::span<const Tensor>(&grads, 1), 1.0f).found;
    if (scaler.update(overflow, step).skip) continue;
    hyper.step = ++applied;
    hyper.grad_scale = 1.0f / scale;
    adamw_step(backend, adam, hyper);
  }
  losses.push_back(gpt.forward(params, tokens, targets));
  return losses;
}

TEST(Fp16Underflow, WithoutLossScalingFp16LagsAndDynamicScalingFollowsFp32) {
  auto backend = make_backend("cpu");
  const GptConfig config{2, 4, 64, 32, 256};
  const std::vector<float> weights = gpt2_init(ParameterLayout(config), config, 1337);
  const Tensor tokens = random_ids(*backend, 4, 32, 256, 1);
  const Tensor targets = random_ids(*backend, 4, 32, 256, 2);
  constexpr int kSteps = 30;

  const auto fp32 = train_losses(*backend, config, weights, DType::kF32, LossScaleMode::kNone,
                                 kSteps, tokens, targets);
  const auto none = train_losses(*backend, config, weights, DType::kF16, LossScaleMode::kNone,
                                 kSteps, tokens, targets);
  const auto dynamic = train_losses(*backend, config, weights, DType::kF16,
                                    LossScaleMode::kDynamic, kSteps, tokens, targets);
  const float start = fp32.front();
  std::printf("loss after %d steps (from %.4f): fp32 %.4f, fp16 loss_scale none %.4f, "
              "fp16 dynamic %.4f\n",
              kSteps, start, fp32.back(), none.back(), dynamic.back());
  ::testing::Test::RecordProperty("final_loss_fp32", std::to_string(fp32.back()));
  ::testing::Test::RecordProperty("final_loss_fp16_none", std::to_string(none.back()));
  ::testing::Test::RecordProperty("final_loss_fp16_dynamic", std::to_string(dynamic.back()));

  const float fp32_drop = start - fp32.back();
  ASSERT_GT(fp32_drop, 1.0f) << "the reference run should learn the batch";
  EXPECT_NEAR(dynamic.back(), fp32.back(), 0.05f * fp32_drop)
      << "fp16 with dynamic loss scaling should train like fp32";
  EXPECT_GT(none.back() - fp32.back(), 0.25f * fp32_drop)
      << "fp16 without loss scaling should end far above fp32: underflow stalls it";
}

}  // namespace
}  // namespace mixtrain::model_test
