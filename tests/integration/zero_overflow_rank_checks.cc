// Why: one rank of zero_overflow_test (started by rank_launcher.h, never by
// ctest directly). An inf or NaN that backward leaves in one rank's
// gradient must stop the step on every rank alike, or the ranks' weights
// drift apart. Every rank here trains an fp16 GPT under a ZeroEngine of
// each stage on its own fixed batch; rank 1 writes the bad value into one
// gradient element just before backward releases the unit for reduction
// (at stages 2 and 3 into the engine's gradient bucket). Every rank must
// then find exactly that parameter, the dynamic loss scaler must skip the
// step and halve the scale on every rank, and the clean step that follows
// must leave every rank with the master weights, bit for bit, of a run
// that never overflowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/amp/loss_scaler.h"
#include "comm/rank_environment.h"
#include "engine/model/gpt.h"
#include "engine/model/gpt_init.h"
#include "engine/numerics/convert.h"
#include "engine/zero/zero_engine.h"

namespace mixtrain {
namespace {

using comm_test::comm;
using comm_test::cpu;
using comm_test::rank;
using comm_test::world;

const GptConfig kModel{2, 2, 32, 16, 256};
constexpr int64_t kBatch = 2;
constexpr int kInjectingRank = 1;
constexpr uint64_t kSeed = 1234;

// One gradient element to overwrite: element `element` of parameter
// `parameter` (layout index), in unit `unit`.
struct Injection {
  size_t unit = 0;
  size_t parameter = 0;
  int64_t element = 0;
  float value = 0.0f;
};

// The element of unit h.0 in the middle of rank `owner`'s chunk (the rank
// that owns its reduced gradient at stages 1-3), to be set to `value`.
Injection middle_of_chunk(const ParameterLayout& layout, int owner, float value) {
  const size_t unit_index = layout.block_unit(0);
  const ParameterUnit& unit = layout.units()[unit_index];
  const int64_t chunk = unit.padded_numel / world();
  const int64_t flat = unit.offset + owner * chunk + chunk / 2;
  size_t p = unit.first_parameter;
  while (flat >= layout.parameters()[p].offset + layout.parameters()[p].numel) ++p;
  return Injection{unit_index, p, flat - layout.parameters()[p].offset, value};
}

// The engine's weights, except that when backward releases the injection's
// unit the injected value first replaces its gradient element.
class InjectingWeights final : public ModelWeights {
 public:
  InjectingWeights(ModelWeights& engine_weights, const ParameterLayout& layout,
                   std::optional<Injection> injection)
      : inner_(engine_weights), layout_(layout), injection_(injection) {}

  void acquire(size_t unit, ModelPass pass) override { inner_.acquire(unit, pass); }
  void release(size_t unit, ModelPass pass) override {
    if (injection_ && pass == ModelPass::kBackward && unit == injection_->unit) {
      const Tensor element =
          inner_.grad(layout_.parameters()[injection_->parameter]).view(injection_->element, {1});
      uint32_t stored = 0;
      convert(&injection_->value, DType::kF32, &stored, element.dtype(), 1);
      cpu().copy_from_host(element, &stored);
    }
    inner_.release(unit, pass);
  }
  Tensor param(const ParameterInfo& info) override { return inner_.param(info); }
  Tensor grad(const ParameterInfo& info) override { return inner_.grad(info); }

 private:
  ModelWeights& inner_;
  const ParameterLayout& layout_;
  std::optional<Injection> injection_;
};

std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

// Every rank's `values`, moved as raw 32-bit words by an all-gather.
std::vector<std::vector<uint32_t>> every_ranks(const std::vector<uint32_t>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor mine = cpu().empty({n}, DType::kI32, MemoryCategory::kCommBuffers);
  std::memcpy(mine.data(), values.data(), mine.nbytes());
  Tensor all = cpu().empty({n * world()}, DType::kI32, MemoryCategory::kCommBuffers);
  comm().all_gather(mine, all);
  std::vector<std::vector<uint32_t>> out(world(), std::vector<uint32_t>(values.size()));
  for (int r = 0; r < world(); ++r)
    std::memcpy(out[r].data(), all.data_as<int32_t>() + r * n, mine.nbytes());
  return out;
}

// One rank's fp16 model, ZeRO state (initialized from kSeed) and fixed
// batch, different on every rank.
class RankTraining {
 public:
  explicit RankTraining(int stage)
      : gpt_(cpu(), kModel, DType::kF16, DType::kF16, world()),
        engine_(cpu(), gpt_, &comm(), ZeroSettings{stage}),
        tokens_(cpu().empty({kBatch, kModel.seq_len}, DType::kI32, MemoryCategory::kActivations)),
        targets_(cpu().empty({kBatch, kModel.seq_len}, DType::kI32, MemoryCategory::kActivations)) {
    engine_.load(ZeroEngine::State::kMaster, gpt2_init(gpt_.layout(), kModel, kSeed));
    engine_.refresh_weights();
    for (int64_t i = 0; i < tokens_.numel(); ++i) {
      tokens_.data_as<int32_t>()[i] = static_cast<int32_t>((i * 31 + rank() * 17) % kModel.vocab);
      targets_.data_as<int32_t>()[i] = static_cast<int32_t>((i * 13 + rank() * 5) % kModel.vocab);
    }
  }

  const ParameterLayout& layout() const { return gpt_.layout(); }

  // Forward and backward of the loss times `scale`, with `injection` on
  // this rank, and the gradient check agreed by all ranks.
  NonFiniteCheck backward(float scale, std::optional<Injection> injection) {
    engine_.begin_step();
    InjectingWeights weights(engine_.train_weights(/*reduce=*/true), gpt_.layout(), injection);
    gpt_.forward(weights, tokens_, targets_);
    gpt_.backward(weights, scale / static_cast<float>(world()));
    engine_.finish_gradients();
    return engine_.check_gradients();
  }

  // The optimizer step of the gradients backward left, scaled by `scale`;
  // returns the gathered master weights.
  std::vector<float> step(float scale) {
    AdamWConfig adamw;
    adamw.grad_scale = 1.0f / scale;
    engine_.optimizer_step(adamw);
    return engine_.gather(ZeroEngine::State::kMaster);
  }

 private:
  Gpt gpt_;
  ZeroEngine engine_;
  Tensor tokens_;
  Tensor targets_;
};

class OverflowAgreement : public testing::TestWithParam<int> {};  // the ZeRO stage

// Rank 1 injects `value` into the gradient element that rank `owner` owns.
void expect_every_rank_skips_alike(int stage, int owner, float value) {
  RankTraining training(stage);
  const Injection injection = middle_of_chunk(training.layout(), owner, value);
  const std::string& name = training.layout().parameters()[injection.parameter].name;
  LossScaler scaler{LossScalerConfig{}};  // dynamic, from 2^16, backoff 0.5, no hysteresis
  const NonFiniteCheck overflow = training.backward(
      scaler.scale(), rank() == kInjectingRank ? std::optional(injection) : std::nullopt);
  EXPECT_TRUE(overflow.found) << name;
  EXPECT_EQ(overflow.tensor_index, static_cast<int>(injection.parameter)) << name;
  EXPECT_EQ(overflow.is_nan, std::isnan(value)) << name;
  const StepDecision backoff = scaler.update(overflow.found, 1, name);
  EXPECT_TRUE(backoff.skip);
  EXPECT_EQ(backoff.old_scale, 65536.0f);
  EXPECT_EQ(backoff.new_scale, 32768.0f);

  const float scale = scaler.scale();
  const NonFiniteCheck clean = training.backward(scale, std::nullopt);
  EXPECT_FALSE(clean.found) << "parameter " << clean.tensor_index;
  const StepDecision next = scaler.update(clean.found, 2);
  EXPECT_FALSE(next.skip);
  EXPECT_EQ(next.new_scale, 32768.0f);
  const std::vector<float> master = training.step(scale);
  EXPECT_TRUE(std::all_of(master.begin(), master.end(), [](float x) { return std::isfinite(x); }));

  RankTraining never_overflowed(stage);
  EXPECT_FALSE(never_overflowed.backward(scale, std::nullopt).found);
  EXPECT_EQ(bits(master), bits(never_overflowed.step(scale))) << "the skipped step left a trace";
  const std::vector<std::vector<uint32_t>> all = every_ranks(bits(master));
  for (int r = 0; r < world(); ++r) EXPECT_EQ(all[r], bits(master)) << "rank " << r;
}

TEST_P(OverflowAgreement, AnInfInRankOnesGradientSkipsTheStepOnEveryRank) {
  expect_every_rank_skips_alike(GetParam(), 0, std::numeric_limits<float>::infinity());
}

TEST_P(OverflowAgreement, ANaNInRankOnesGradientSkipsTheStepOnEveryRank) {
  expect_every_rank_skips_alike(GetParam(), world() - 1, std::numeric_limits<float>::quiet_NaN());
}

INSTANTIATE_TEST_SUITE_P(Stages, OverflowAgreement, testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace mixtrain
