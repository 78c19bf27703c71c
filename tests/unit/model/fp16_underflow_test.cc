// Why: the reason loss scaling exists (Micikevicius et al., 2018): small
// gradients fall below fp16's smallest subnormal (2^-24) and become zero.
// Here a loss weighted by 2^-14 (as a long gradient accumulation or a tiny
// loss term gives) is backpropagated in fp16 two ways against an fp32
// reference on the same weights and batch: unscaled, most nonzero gradient
// entries flush to zero; scaled by 2^16 (the dynamic scaler's initial
// scale) and unscaled in fp32 afterwards, almost none do and the gradients
// match fp32. The measured fractions are printed and recorded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/gpt_init.h"
#include "model/parameter_layout.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

constexpr float kLossWeight = 1.0f / 16384.0f;  // 2^-14
constexpr float kLossScale = 65536.0f;           // GradScaler's init_scale

// Gradients of kLossWeight * loss * scale, in `compute` with grads of the
// same dtype, read back as fp32 and divided by `scale` in fp32.
std::vector<float> gradients(Backend& backend, const GptConfig& config,
                             const std::vector<float>& weights, DType compute, float scale,
                             const Tensor& tokens, const Tensor& targets) {
  Gpt gpt(backend, config, compute, compute);
  const Tensor params = make_flat(backend, weights, compute, MemoryCategory::kParams);
  const Tensor grads = make_grads(backend, gpt.layout().numel(), compute);
  gpt.forward(params, tokens, targets);
  gpt.backward(params, grads, kLossWeight * scale);
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
  const auto unscaled = gradients(*backend, config, weights, DType::kF16, 1.0f, tokens, targets);
  const auto scaled = gradients(*backend, config, weights, DType::kF16, kLossScale, tokens, targets);

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
}

}  // namespace
}  // namespace mixtrain::model_test
