// Why: a bad call to the model must fail up front with an EngineError
// naming what is wrong, never read out of bounds or compute garbage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

using ::testing::HasSubstr;

// The message of the EngineError(kInvalidArgument) that f throws, or a
// failure description when it throws nothing or something else.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "(no EngineError thrown)";
}

Tensor ids_tensor(Backend& backend, const Shape& shape, std::vector<int32_t> ids) {
  Tensor t = backend.empty(shape, DType::kI32, MemoryCategory::kActivations);
  backend.copy_from_host(t, ids.data());
  return t;
}

class GptErrorsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = make_backend("cpu");
  GptConfig config_ = tiny_config();
  Gpt gpt_{*backend_, config_, DType::kF32, DType::kF32};
  Tensor params_ = make_flat(*backend_, gpt2_init(gpt_.layout(), config_, 1), DType::kF32,
                             MemoryCategory::kParams);
  Tensor grads_ = make_grads(*backend_, gpt_.layout().numel(), DType::kF32);
  Tensor tokens_ = random_ids(*backend_, 2, 4, config_.vocab, 2);
  Tensor targets_ = random_ids(*backend_, 2, 4, config_.vocab, 3);
};

TEST_F(GptErrorsTest, BadConstructorArguments) {
  EXPECT_THAT(error_of([&] { Gpt(*backend_, GptConfig{2, 3, 8, 4, 11}, DType::kF32, DType::kF32); }),
              HasSubstr("heads"));
  EXPECT_THAT(error_of([&] { Gpt(*backend_, config_, DType::kFP8E4M3, DType::kF32); }),
              HasSubstr("compute dtype fp8_e4m3"));
  EXPECT_THAT(error_of([&] { Gpt(*backend_, config_, DType::kF16, DType::kBF16); }),
              HasSubstr("grad dtype bf16"));
  EXPECT_THAT(error_of([&] { Gpt(*backend_, config_, DType::kF32, DType::kBF16); }),
              HasSubstr("grad dtype bf16"));
}

TEST_F(GptErrorsTest, TokensOutOfRange) {
  const Tensor too_big = ids_tensor(*backend_, {2, 4}, {0, 1, 2, 3, 4, 5, 11, 0});
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, too_big, targets_); }), HasSubstr("tokens"));
  const Tensor negative = ids_tensor(*backend_, {2, 4}, {0, 1, 2, -1, 4, 5, 6, 0});
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, negative); }), HasSubstr("tokens"));
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, tokens_, too_big); }), HasSubstr("targets"));
}

TEST_F(GptErrorsTest, BadShapes) {
  const Tensor too_long = random_ids(*backend_, 1, 5, config_.vocab, 4);
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, too_long); }), HasSubstr("seq_len 4"));
  const Tensor flat = ids_tensor(*backend_, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, flat); }), HasSubstr("(B, T)"));
  const Tensor other_shape = random_ids(*backend_, 4, 2, config_.vocab, 5);
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, tokens_, other_shape); }),
              HasSubstr("shape of tokens"));
  EXPECT_THAT(error_of([&] { gpt_.forward(params_.view(0, {params_.numel() - 1}), tokens_); }),
              HasSubstr("params"));
}

TEST_F(GptErrorsTest, WrongDtypes) {
  const Tensor float_tokens =
      make_flat(*backend_, std::vector<float>(8, 1.0f), DType::kF32, MemoryCategory::kActivations)
          .reshape({2, 4});
  EXPECT_THAT(error_of([&] { gpt_.forward(params_, float_tokens); }), HasSubstr("tokens"));
  const Tensor bf16_params = make_flat(*backend_, gpt2_init(gpt_.layout(), config_, 1),
                                       DType::kBF16, MemoryCategory::kParams);
  EXPECT_THAT(error_of([&] { gpt_.forward(bf16_params, tokens_, targets_); }),
              HasSubstr("params"));
  gpt_.forward(params_, tokens_, targets_);
  const Tensor bf16_grads = make_grads(*backend_, gpt_.layout().numel(), DType::kBF16);
  EXPECT_THAT(error_of([&] { gpt_.backward(params_, bf16_grads, 1.0f); }), HasSubstr("grads"));
}

TEST_F(GptErrorsTest, BackwardNeedsAForwardWithTargets) {
  EXPECT_THAT(error_of([&] { gpt_.backward(params_, grads_, 1.0f); }),
              HasSubstr("forward with targets"));
  gpt_.forward(params_, tokens_);
  EXPECT_THAT(error_of([&] { gpt_.backward(params_, grads_, 1.0f); }),
              HasSubstr("forward with targets"));
  gpt_.forward(params_, tokens_, targets_);
  gpt_.backward(params_, grads_, 1.0f);
  EXPECT_THAT(error_of([&] { gpt_.backward(params_, grads_, 1.0f); }),
              HasSubstr("forward with targets"));
}

TEST_F(GptErrorsTest, LogitsNeedAForwardAndAreGoneAfterBackward) {
  EXPECT_THAT(error_of([&] { gpt_.logits(); }), HasSubstr("no forward"));
  gpt_.forward(params_, tokens_, targets_);
  EXPECT_EQ(gpt_.logits().shape(), (Shape{2, 4, 64}));
  gpt_.backward(params_, grads_, 1.0f);
  EXPECT_THAT(error_of([&] { gpt_.logits(); }), HasSubstr("backward"));
}

}  // namespace
}  // namespace mixtrain::model_test
