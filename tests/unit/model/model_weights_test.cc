// Why: ZeRO relies on two promises of the GPT's unit interface: every
// parameter is read (and every gradient written) only while its unit is
// acquired, in a fixed order with one release per unit and pass; and a
// layout padded for N ranks computes exactly what the plain layout does,
// with the padding's gradient left at zero.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

// Flat weights that log acquire/release and flag any access outside them.
class RecordingWeights final : public ModelWeights {
 public:
  RecordingWeights(const ParameterLayout& layout, Tensor params, Tensor grads)
      : layout_(layout),
        flat_(std::move(params), std::move(grads)),
        held_(layout.units().size(), false) {}

  void acquire(size_t unit, ModelPass pass) override {
    log_.push_back(std::string(pass == ModelPass::kForward ? "F" : "B") + "+" +
                   layout_.units()[unit].name);
    if (held_[unit]) violations_.push_back("acquired twice: " + layout_.units()[unit].name);
    held_[unit] = true;
  }
  void release(size_t unit, ModelPass pass) override {
    log_.push_back(std::string(pass == ModelPass::kForward ? "F" : "B") + "-" +
                   layout_.units()[unit].name);
    if (!held_[unit]) violations_.push_back("released unheld: " + layout_.units()[unit].name);
    held_[unit] = false;
  }
  Tensor param(const ParameterInfo& info) override {
    check_held(info);
    return flat_.param(info);
  }
  Tensor grad(const ParameterInfo& info) override {
    check_held(info);
    return flat_.grad(info);
  }

  const std::vector<std::string>& log() const { return log_; }
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  void check_held(const ParameterInfo& info) {
    for (size_t u = 0; u < layout_.units().size(); ++u) {
      const ParameterUnit& unit = layout_.units()[u];
      if (info.offset >= unit.offset && info.offset < unit.offset + unit.numel && !held_[u])
        violations_.push_back("used outside its unit: " + info.name);
    }
  }

  const ParameterLayout& layout_;
  FlatModelWeights flat_;
  std::vector<bool> held_;
  std::vector<std::string> log_;
  std::vector<std::string> violations_;
};

// Activation checkpointing's recompute runs inside the backward's hold of
// the block, so it adds no acquire (and no ZeRO-3 gather).
TEST(ModelWeightsTest, UnitsAreAcquiredAroundEveryUseInPassOrder) {
  for (const auto mode :
       {config::ActivationCheckpointing::kNone, config::ActivationCheckpointing::kSelective,
        config::ActivationCheckpointing::kBlocks}) {
    SCOPED_TRACE(config::enum_name(mode));
    auto backend = make_backend("cpu");
    const GptConfig config = GptConfig{3, 2, 8, 4, 11};
    Gpt gpt(*backend, config, DType::kF32, DType::kF32, 1, mode);
    const Tensor params = make_flat(*backend, gpt2_init(gpt.layout(), config, 3), DType::kF32,
                                    MemoryCategory::kParams);
    RecordingWeights weights(gpt.layout(), params,
                             make_grads(*backend, gpt.layout().numel(), DType::kF32));
    gpt.forward(weights, random_ids(*backend, 2, 4, config.vocab, 1),
                random_ids(*backend, 2, 4, config.vocab, 2));
    gpt.backward(weights, 1.0f);
    const std::vector<std::string> expected = {
        "F+embeddings", "F+h.0",  "F-h.0",        "F+h.1",        "F-h.1",  "F+h.2",       "F-h.2",
        "F+ln_f",       "F-ln_f", "F-embeddings", "B+embeddings", "B+ln_f", "B-ln_f",      "B+h.2",
        "B-h.2",        "B+h.1",  "B-h.1",        "B+h.0",        "B-h.0",  "B-embeddings"};
    EXPECT_EQ(weights.log(), expected);
    EXPECT_TRUE(weights.violations().empty()) << weights.violations().front();
  }
}

TEST(ModelWeightsTest, PaddedLayoutComputesThePlainLayoutsLossAndGradients) {
  auto backend = make_backend("cpu");
  const GptConfig config = tiny_config();
  Gpt plain(*backend, config, DType::kF32, DType::kF32);
  Gpt padded(*backend, config, DType::kF32, DType::kF32, /*unit_alignment=*/7);
  ASSERT_GT(padded.layout().numel(), plain.layout().numel());
  const std::vector<float> plain_weights = gpt2_init(plain.layout(), config, 5);
  const std::vector<float> padded_weights = gpt2_init(padded.layout(), config, 5);
  const Tensor tokens = random_ids(*backend, 3, 4, config.vocab, 6);
  const Tensor targets = random_ids(*backend, 3, 4, config.vocab, 7);

  auto run = [&](Gpt& gpt, const std::vector<float>& w, float& loss) {
    const Tensor params = make_flat(*backend, w, DType::kF32, MemoryCategory::kParams);
    const Tensor grads = make_grads(*backend, gpt.layout().numel(), DType::kF32);
    loss = gpt.forward(params, tokens, targets);
    gpt.backward(params, grads, 1.0f);
    return to_host(*backend, grads);
  };
  float plain_loss = 0.0f, padded_loss = 0.0f;
  const std::vector<float> plain_grads = run(plain, plain_weights, plain_loss);
  const std::vector<float> padded_grads = run(padded, padded_weights, padded_loss);
  EXPECT_EQ(plain_loss, padded_loss);

  std::vector<bool> is_parameter(padded_grads.size(), false);
  for (size_t i = 0; i < plain.layout().parameters().size(); ++i) {
    const ParameterInfo& a = plain.layout().parameters()[i];
    const ParameterInfo& b = padded.layout().parameters()[i];
    for (int64_t k = 0; k < a.numel; ++k) {
      EXPECT_EQ(padded_weights[b.offset + k], plain_weights[a.offset + k]) << a.name;
      ASSERT_EQ(padded_grads[b.offset + k], plain_grads[a.offset + k]) << a.name << "[" << k << "]";
      is_parameter[b.offset + k] = true;
    }
  }
  for (size_t i = 0; i < padded_grads.size(); ++i) {
    if (!is_parameter[i]) {
      EXPECT_EQ(padded_grads[i], 0.0f) << "padding element " << i;
    }
  }
}

}  // namespace
}  // namespace mixtrain::model_test
