// Why: the hand-written backward is the riskiest code of the model. It is
// checked against central finite differences of the forward for every
// parameter tensor of a tiny fp32 model (a spread sample of each one's
// entries), for accumulation and scaling (backward ADDS dloss times the
// gradient), and in bf16 against fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

// Weights that make every layer matter: uniform in [-0.5, 0.5] (LayerNorm
// weights around 1), much larger than the 0.02 init, under which the
// deeper parameters' gradients would be too small to measure by finite
// differences in fp32.
std::vector<float> lively_weights(const ParameterLayout& layout, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> w(static_cast<size_t>(layout.numel()));
  for (const ParameterInfo& p : layout.parameters()) {
    const float center = p.kind == ParameterKind::kLayerNormWeight ? 1.0f : 0.0f;
    for (int64_t i = 0; i < p.numel; ++i) w[p.offset + i] = center + dist(rng);
  }
  return w;
}

// max|a[i] - b[i]| / max|b[i]| over the flat indices i.
double max_norm_error(const std::vector<float>& a, const std::vector<float>& b,
                      const std::vector<int64_t>& indices) {
  double error = 0.0, scale = 0.0;
  for (int64_t i : indices) {
    error = std::max(error, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return error / std::max(scale, 1e-30);
}

// The flat indices of parameter p's elements: all of them, or `count`
// spread evenly over them (first and last included) when there are more.
std::vector<int64_t> element_indices(const ParameterInfo& p, int64_t count = -1) {
  const int64_t n = count < 0 ? p.numel : std::min(count, p.numel);
  std::vector<int64_t> indices;
  for (int64_t k = 0; k < n; ++k) {
    indices.push_back(p.offset + (n == 1 ? 0 : k * (p.numel - 1) / (n - 1)));
  }
  return indices;
}

class GptGradientTest : public ::testing::Test {
 protected:
  // Gradient of dloss * mean loss of (tokens, targets) at `weights`, from
  // a fresh zeroed gradient buffer.
  std::vector<float> gradient(Gpt& gpt, const std::vector<float>& weights, const Tensor& tokens,
                              const Tensor& targets, float dloss = 1.0f) {
    const Tensor params = make_flat(*backend_, weights, gpt.compute_dtype(), MemoryCategory::kParams);
    const Tensor grads = make_grads(*backend_, gpt.layout().numel(), gpt.grad_dtype());
    gpt.forward(params, tokens, targets);
    gpt.backward(params, grads, dloss);
    return to_host(*backend_, grads);
  }

  std::unique_ptr<Backend> backend_ = make_backend("cpu");
  GptConfig config_ = tiny_config();
  ParameterLayout layout_{config_};
  std::vector<float> weights_ = lively_weights(layout_, 21);
  Tensor tokens_ = random_ids(*backend_, 2, 4, config_.vocab, 22);
  Tensor targets_ = random_ids(*backend_, 2, 4, config_.vocab, 23);
};

TEST_F(GptGradientTest, MatchesFiniteDifferencesForEveryParameter) {
  // Step h = 1e-2 on fp32: the loss (~3) is rounded to fp32 (ulp 2.4e-7)
  // after sums of rounded terms, so each loss carries ~1e-6 of error and a
  // difference quotient (f(x+h) - f(x-h)) / 2h carries ~1e-6 / 2e-2 = 5e-5;
  // the O(h^2) truncation error is of the same size. A smaller step would
  // drown in rounding, a larger one in curvature. Against each tensor's
  // largest gradient (1e-2 .. 1e-1 here) that is well under 1e-2, while a
  // wrong term of the backward is off by O(1) of it.
  //
  // 24 entries spread over each tensor (all of the smaller ones) keep the
  // ~1300 forwards to a few seconds.
  Gpt gpt(*backend_, config_, DType::kF32, DType::kF32);
  const std::vector<float> analytic = gradient(gpt, weights_, tokens_, targets_);
  Tensor params = make_flat(*backend_, weights_, DType::kF32, MemoryCategory::kParams);
  float* w = params.data_as<float>();
  const double h = 1e-2;
  std::vector<float> numeric(analytic.size());
  for (const ParameterInfo& p : layout_.parameters()) {
    const std::vector<int64_t> sample = element_indices(p, 24);
    for (int64_t i : sample) {
      const float original = w[i];
      w[i] = static_cast<float>(original + h);
      const double up = gpt.forward(params, tokens_, targets_);
      w[i] = static_cast<float>(original - h);
      const double down = gpt.forward(params, tokens_, targets_);
      w[i] = original;
      numeric[i] = static_cast<float>((up - down) / (2.0 * h));
    }
    EXPECT_LT(max_norm_error(analytic, numeric, sample), 1e-2) << p.name;
  }
}

TEST_F(GptGradientTest, BackwardAddsAndScalesByDloss) {
  Gpt gpt(*backend_, config_, DType::kF32, DType::kF32);
  const Tensor other_tokens = random_ids(*backend_, 2, 4, config_.vocab, 31);
  const Tensor other_targets = random_ids(*backend_, 2, 4, config_.vocab, 32);
  const std::vector<float> first = gradient(gpt, weights_, tokens_, targets_);
  const std::vector<float> second = gradient(gpt, weights_, other_tokens, other_targets);
  // A power-of-two dloss scales every intermediate exactly.
  EXPECT_EQ(gradient(gpt, weights_, tokens_, targets_, 4.0f), [&] {
    std::vector<float> scaled = first;
    for (float& g : scaled) g *= 4.0f;
    return scaled;
  }());

  const Tensor params = make_flat(*backend_, weights_, DType::kF32, MemoryCategory::kParams);
  const Tensor grads = make_grads(*backend_, layout_.numel(), DType::kF32);
  gpt.forward(params, tokens_, targets_);
  gpt.backward(params, grads, 1.0f);
  gpt.forward(params, other_tokens, other_targets);
  gpt.backward(params, grads, 1.0f);
  const std::vector<float> accumulated = to_host(*backend_, grads);
  for (size_t i = 0; i < accumulated.size(); ++i) {
    // Each add rounds once: 1 ulp of the sum's larger term.
    const float sum = first[i] + second[i];
    ASSERT_NEAR(accumulated[i], sum, 1e-6f * (std::abs(first[i]) + std::abs(second[i])))
        << "element " << i;
  }
}

TEST_F(GptGradientTest, Bf16GradientsAreCloseToFp32) {
  // The bf16 model runs at the weights rounded to bf16, with bf16
  // activations and activation gradients (8 significant bits, 0.4% per
  // rounding) through 2 blocks, each gradient a dozen roundings deep: the
  // per-tensor max-norm errors measure 0.3% to 6% (the largest on 8-element
  // LayerNorm tensors). 10% leaves margin, while a missing or wrong term of
  // the bf16 path would be off by O(1).
  Gpt fp32_model(*backend_, config_, DType::kF32, DType::kF32);
  Gpt bf16_model(*backend_, config_, DType::kBF16, DType::kF32);
  const std::vector<float> want = gradient(fp32_model, weights_, tokens_, targets_);
  const std::vector<float> got = gradient(bf16_model, weights_, tokens_, targets_);
  for (const ParameterInfo& p : layout_.parameters()) {
    EXPECT_LT(max_norm_error(got, want, element_indices(p)), 0.1) << p.name;
  }
}

}  // namespace
}  // namespace mixtrain::model_test
