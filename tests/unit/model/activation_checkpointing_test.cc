// Why: activation checkpointing may change only what the forward keeps,
// never what the backward computes. On the CPU backend the recompute runs
// the forward's ops on the forward's inputs, so the loss and every
// gradient must be the bits of the run that keeps everything, in every
// compute dtype and across accumulated micro-batches; and the memory kept
// must be exactly the tensors each mode keeps.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/model/gpt_activations.h"
#include "engine/model/gpt_init.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

using config::ActivationCheckpointing;

constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 8;

// L=3, NH=2, C=16, T=8, V=11: three blocks, so the backward recomputes two
// and finds the last one's tensors left by the forward.
GptConfig three_block_config() { return GptConfig{3, 2, 16, 8, 11}; }

struct Pass {
  std::vector<float> losses;
  std::vector<float> grads;
};

// Two micro-batches accumulated into one gradient, with `mode`.
Pass train_two_micro_batches(DType dtype, ActivationCheckpointing mode) {
  auto backend = make_backend("cpu");
  const GptConfig config = three_block_config();
  Gpt gpt(*backend, config, dtype, dtype, 1, mode);
  const Tensor params =
      make_flat(*backend, gpt2_init(gpt.layout(), config, 11), dtype, MemoryCategory::kParams);
  const Tensor grads = make_grads(*backend, gpt.layout().numel(), dtype);
  Pass pass;
  for (uint32_t micro = 0; micro < 2; ++micro) {
    pass.losses.push_back(
        gpt.forward(params, random_ids(*backend, kBatch, kSeq, config.vocab, micro),
                    random_ids(*backend, kBatch, kSeq, config.vocab, 10 + micro)));
    gpt.backward(params, grads, 1024.0f);
  }
  pass.grads = to_host(*backend, grads);
  return pass;
}

class ActivationCheckpointingGradients
    : public testing::TestWithParam<std::tuple<DType, ActivationCheckpointing>> {};

TEST_P(ActivationCheckpointingGradients, AreTheBitsOfKeepingEverything) {
  const auto [dtype, mode] = GetParam();
  const Pass kept = train_two_micro_batches(dtype, ActivationCheckpointing::kNone);
  const Pass recomputed = train_two_micro_batches(dtype, mode);
  EXPECT_EQ(recomputed.losses, kept.losses);
  ASSERT_EQ(recomputed.grads.size(), kept.grads.size());
  size_t nonzero = 0;
  for (size_t i = 0; i < kept.grads.size(); ++i) {
    ASSERT_EQ(std::memcmp(&recomputed.grads[i], &kept.grads[i], sizeof(float)), 0)
        << "gradient " << i << ": " << recomputed.grads[i] << " vs " << kept.grads[i];
    nonzero += kept.grads[i] != 0.0f;
  }
  EXPECT_GT(nonzero, kept.grads.size() / 2);  // the comparison is not of zeros
}

INSTANTIATE_TEST_SUITE_P(
    EveryDtype, ActivationCheckpointingGradients,
    testing::Combine(testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                     testing::Values(ActivationCheckpointing::kSelective,
                                     ActivationCheckpointing::kBlocks)),
    [](const testing::TestParamInfo<std::tuple<DType, ActivationCheckpointing>>& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_" +
             std::string(config::enum_name(std::get<1>(info.param)));
    });

// The activation bytes after a forward, counted from the tensors each
// mode keeps (gpt_activations.h) for B=2, T=8, fp32.
TEST(ActivationCheckpointingMemory, KeepsExactlyTheModesTensors) {
  const GptConfig config = three_block_config();
  const int64_t positions = kBatch * kSeq, c = config.dim, layers = config.layers;
  const int64_t attention = config.heads * kSeq;  // (NH,T) per position
  // Per position, in 4-byte elements: ids, embeddings, the projection
  // scratch, ln_f and its statistics, the logits, the losses.
  const int64_t outside_blocks = 3 + c + c + c + 2 + config.padded_vocab() + 1;
  // Every block tensor: ln1, qkv, att, atty, residual2, ln2, fch, fch_gelu,
  // residual3 and the four LayerNorm statistics.
  const int64_t whole_block = 16 * c + attention + 4;
  const int64_t selective_kept = 3 * c + c + 4 * c + c + 4;  // qkv, residual2, fch, residual3
  const int64_t blocks_kept = c;                             // residual3
  const std::vector<std::pair<ActivationCheckpointing, int64_t>> expected = {
      {ActivationCheckpointing::kNone, layers * whole_block},
      {ActivationCheckpointing::kSelective,
       layers * selective_kept + (whole_block - selective_kept)},
      {ActivationCheckpointing::kBlocks, layers * blocks_kept + (whole_block - blocks_kept)},
  };
  for (const auto& [mode, block_elements] : expected) {
    auto backend = make_backend("cpu");
    Gpt gpt(*backend, config, DType::kF32, DType::kF32, 1, mode);
    const Tensor params = make_flat(*backend, gpt2_init(gpt.layout(), config, 3), DType::kF32,
                                    MemoryCategory::kParams);
    const Tensor tokens = random_ids(*backend, kBatch, kSeq, config.vocab, 1);
    const Tensor targets = random_ids(*backend, kBatch, kSeq, config.vocab, 2);
    const size_t before =
        backend->memory().current(MemoryPool::kDevice, MemoryCategory::kActivations);
    gpt.forward(params, tokens, targets);
    const size_t kept =
        backend->memory().current(MemoryPool::kDevice, MemoryCategory::kActivations) - before;
    EXPECT_EQ(kept, static_cast<size_t>(4 * positions * (outside_blocks + block_elements)))
        << config::enum_name(mode);
  }
}

// The planner sizes a rank's activations by activation_bytes_per_position:
// a forward and backward allocate exactly that, in every mode and dtype.
TEST(ActivationCheckpointingMemory, ThePlannedBytesAreWhatForwardAndBackwardAllocate) {
  const GptConfig config = three_block_config();
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const ActivationCheckpointing mode :
         {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
          ActivationCheckpointing::kBlocks}) {
      auto backend = make_backend("cpu");
      Gpt gpt(*backend, config, dtype, dtype, 1, mode);
      const Tensor params =
          make_flat(*backend, gpt2_init(gpt.layout(), config, 3), dtype, MemoryCategory::kParams);
      const Tensor grads = backend->zeros({gpt.layout().numel()}, dtype, MemoryCategory::kGrads);
      const Tensor tokens = random_ids(*backend, kBatch, kSeq, config.vocab, 1);
      const Tensor targets = random_ids(*backend, kBatch, kSeq, config.vocab, 2);
      const size_t before =
          backend->memory().current(MemoryPool::kDevice, MemoryCategory::kActivations);
      gpt.forward(params, tokens, targets);
      gpt.backward(params, grads, 1.0f);
      const size_t allocated =
          backend->memory().current(MemoryPool::kDevice, MemoryCategory::kActivations) - before;
      EXPECT_EQ(allocated,
                static_cast<size_t>(kBatch * kSeq *
                                    activation_bytes_per_position(config, dtype, kSeq, mode)))
          << dtype_name(dtype) << " " << config::enum_name(mode);
    }
  }
}

}  // namespace
}  // namespace mixtrain::model_test
