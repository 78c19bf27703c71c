// Why: the forward pass must start training at the loss of a uniform guess,
// agree across compute dtypes, expose the logits for sampling, and keep its
// activations allocated once per batch shape; the vocabulary's padding
// changes nothing it computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

class GptForwardTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = make_backend("cpu");
};

TEST_F(GptForwardTest, InitialLossIsLogVocab) {
  // At init the logits are nearly 0 (0.02-scale weights) so the model
  // predicts close to uniformly: loss ~ ln(V) for random targets.
  const GptConfig config{2, 4, 64, 64, 256};
  Gpt gpt(*backend_, config, DType::kF32, DType::kF32);
  const Tensor params = make_flat(*backend_, gpt2_init(gpt.layout(), config, 7), DType::kF32,
                                  MemoryCategory::kParams);
  const Tensor tokens = random_ids(*backend_, 4, 64, config.vocab, 1);
  const Tensor targets = random_ids(*backend_, 4, 64, config.vocab, 2);
  EXPECT_NEAR(gpt.forward(params, tokens, targets), std::log(256.0), 0.1);
}

TEST_F(GptForwardTest, LogitsAreTheSameWithAndWithoutTargets) {
  const GptConfig config = tiny_config();
  Gpt gpt(*backend_, config, DType::kF32, DType::kF32);
  const Tensor params = make_flat(*backend_, gpt2_init(gpt.layout(), config, 3), DType::kF32,
                                  MemoryCategory::kParams);
  const Tensor tokens = random_ids(*backend_, 3, 4, config.vocab, 4);
  gpt.forward(params, tokens, random_ids(*backend_, 3, 4, config.vocab, 5));
  const Tensor logits = gpt.logits();
  EXPECT_EQ(logits.shape(), (Shape{3, 4, 64}));
  const std::vector<float> with_targets = to_host(*backend_, logits);
  gpt.forward(params, tokens);
  EXPECT_EQ(to_host(*backend_, gpt.logits()), with_targets);
}

// The vocabulary is padded from 11 to 64 logits per position: the padding
// columns come out zero (wte's padding rows are), the loss is the
// cross-entropy over the first V columns only, and backward leaves the
// padding rows' gradient exactly zero, so they stay zero under AdamW.
TEST_F(GptForwardTest, PaddedVocabularyIsZeroAndLeftOutOfTheLossAndGradient) {
  const GptConfig config = tiny_config();
  Gpt gpt(*backend_, config, DType::kF32, DType::kF32);
  const ParameterLayout& layout = gpt.layout();
  const Tensor params = make_flat(*backend_, gpt2_init(layout, config, 3), DType::kF32,
                                  MemoryCategory::kParams);
  const std::vector<int32_t> target_ids = {3, 10, 0, 7, 5, 1, 9, 2};
  Tensor targets = backend_->empty({2, 4}, DType::kI32, MemoryCategory::kActivations);
  backend_->copy_from_host(targets, target_ids.data());
  const float loss = gpt.forward(params, random_ids(*backend_, 2, 4, config.vocab, 6), targets);
  const std::vector<float> logits = to_host(*backend_, gpt.logits());
  const int64_t vp = config.padded_vocab();
  double expected = 0.0;
  for (size_t row = 0; row < target_ids.size(); ++row) {
    const float* z = logits.data() + row * static_cast<size_t>(vp);
    for (int64_t j = config.vocab; j < vp; ++j) ASSERT_EQ(z[j], 0.0f) << "row " << row;
    double max = z[0], sum = 0.0;
    for (int64_t j = 1; j < config.vocab; ++j) max = std::max<double>(max, z[j]);
    for (int64_t j = 0; j < config.vocab; ++j) sum += std::exp(z[j] - max);
    expected += std::log(sum) + max - z[target_ids[row]];
  }
  EXPECT_NEAR(loss, expected / static_cast<double>(target_ids.size()), 1e-5);

  const Tensor grads = make_grads(*backend_, layout.numel(), DType::kF32);
  gpt.backward(params, grads, 1.0f);
  const std::vector<float> g = to_host(*backend_, grads);
  const int64_t wte_end = layout.wte().offset + layout.wte().numel;
  double wte_grad = 0.0;
  for (int64_t i = layout.wte().offset; i < wte_end; ++i) wte_grad += std::fabs(g[i]);
  EXPECT_GT(wte_grad, 0.0);
  for (int64_t i = wte_end; i < layout.wpe().offset; ++i) ASSERT_EQ(g[i], 0.0f) << "element " << i;
}

TEST_F(GptForwardTest, ActivationsAreAllocatedOncePerBatchShape) {
  const GptConfig config = tiny_config();
  Gpt gpt(*backend_, config, DType::kF32, DType::kF32);
  const Tensor params = make_flat(*backend_, gpt2_init(gpt.layout(), config, 3), DType::kF32,
                                  MemoryCategory::kParams);
  const auto activation_bytes = [&] {
    return backend_->memory().current(MemoryPool::kDevice, MemoryCategory::kActivations);
  };
  // The ids made by the test are themselves counted as activations.
  const Tensor tokens = random_ids(*backend_, 2, 4, config.vocab, 4);
  const Tensor short_tokens = random_ids(*backend_, 2, 3, config.vocab, 5);
  const size_t before = activation_bytes();
  gpt.forward(params, tokens);
  const size_t first = activation_bytes();
  EXPECT_GT(first, before);
  gpt.forward(params, tokens);
  EXPECT_EQ(activation_bytes(), first);
  gpt.forward(params, short_tokens);  // T < seq_len is allowed, and smaller
  EXPECT_LT(activation_bytes(), first);
  EXPECT_EQ(gpt.logits().shape(), (Shape{2, 3, 64}));
}

TEST_F(GptForwardTest, LowPrecisionLossesAreCloseToFp32) {
  // Weights 10x the init scale make the loss far from ln(V), so agreement
  // is not just three uniform predictions. bf16 keeps 8 significant bits
  // (0.4% per rounding) and fp16 11; over a few layers the loss moves by
  // well under 2%.
  const GptConfig config{2, 4, 64, 32, 64};
  const ParameterLayout layout(config);
  std::vector<float> weights = gpt2_init(layout, config, 11);
  for (const ParameterInfo& p : layout.parameters()) {
    if (!p.decay) continue;
    for (int64_t i = 0; i < p.numel; ++i) weights[p.offset + i] *= 10.0f;
  }
  const Tensor tokens = random_ids(*backend_, 4, 32, config.vocab, 8);
  const Tensor targets = random_ids(*backend_, 4, 32, config.vocab, 9);
  const auto loss_in = [&](DType dtype) {
    Gpt gpt(*backend_, config, dtype, dtype);
    return gpt.forward(make_flat(*backend_, weights, dtype, MemoryCategory::kParams), tokens,
                       targets);
  };
  const float fp32 = loss_in(DType::kF32);
  EXPECT_GT(std::abs(fp32 - std::log(64.0f)), 0.5f);
  EXPECT_NEAR(loss_in(DType::kBF16), fp32, 0.02 * fp32);
  EXPECT_NEAR(loss_in(DType::kF16), fp32, 0.02 * fp32);
}

}  // namespace
}  // namespace mixtrain::model_test
