// Why: allocation of the activation tensors declared in gpt_activations.h.
#include "engine/model/gpt_activations.h"

#include <vector>

namespace mixtrain {

namespace {

using config::ActivationCheckpointing;

// The shape of a block tensor for (B,T): per position, fp32 (LayerNorm
// statistics); C, 3C or 4C wide; or (B,NH,T,T).
enum class BlockShape { kRowStats, kDim, kQkv, kMlp, kAttention };

// One tensor of BlockActivations: its shape, and whether each
// checkpointing mode keeps it per block.
struct BlockTensor {
  Tensor BlockActivations::*member;
  BlockShape shape;
  bool kept_by_selective;
  bool kept_by_blocks;
};

constexpr BlockTensor kBlockTensors[] = {
    {&BlockActivations::ln1, BlockShape::kDim, false, false},
    {&BlockActivations::ln1_mean, BlockShape::kRowStats, true, false},
    {&BlockActivations::ln1_rstd, BlockShape::kRowStats, true, false},
    {&BlockActivations::qkv, BlockShape::kQkv, true, false},
    {&BlockActivations::att, BlockShape::kAttention, false, false},
    {&BlockActivations::atty, BlockShape::kDim, false, false},
    {&BlockActivations::residual2, BlockShape::kDim, true, false},
    {&BlockActivations::ln2, BlockShape::kDim, false, false},
    {&BlockActivations::ln2_mean, BlockShape::kRowStats, true, false},
    {&BlockActivations::ln2_rstd, BlockShape::kRowStats, true, false},
    {&BlockActivations::fch, BlockShape::kMlp, true, false},
    {&BlockActivations::fch_gelu, BlockShape::kMlp, false, false},
    {&BlockActivations::residual3, BlockShape::kDim, true, true},
};

bool kept(const BlockTensor& tensor, ActivationCheckpointing mode) {
  switch (mode) {
    case ActivationCheckpointing::kNone:
      return true;
    case ActivationCheckpointing::kSelective:
      return tensor.kept_by_selective;
    case ActivationCheckpointing::kBlocks:
      return tensor.kept_by_blocks;
  }
  return true;
}

// The bytes of one position's row of a tensor of `shape`.
int64_t row_bytes(BlockShape shape, const GptConfig& config, DType dtype, int64_t seq) {
  const int64_t element = static_cast<int64_t>(dtype_size(dtype));
  switch (shape) {
    case BlockShape::kRowStats:
      return static_cast<int64_t>(dtype_size(DType::kF32));
    case BlockShape::kQkv:
      return 3 * config.dim * element;
    case BlockShape::kMlp:
      return 4 * config.dim * element;
    case BlockShape::kAttention:
      return config.heads * seq * element;
    case BlockShape::kDim:
      break;
  }
  return config.dim * element;
}

}  // namespace

BlockActivationBytes block_activation_bytes(const GptConfig& config, DType dtype, int64_t seq,
                                            ActivationCheckpointing checkpointing) {
  BlockActivationBytes out;
  for (const BlockTensor& tensor : kBlockTensors)
    (kept(tensor, checkpointing) ? out.kept : out.shared) +=
        row_bytes(tensor.shape, config, dtype, seq);
  return out;
}

GptActivations::GptActivations(Backend& backend, const GptConfig& config, DType dtype,
                               int64_t batch_size, int64_t seq_len,
                               ActivationCheckpointing checkpointing_mode)
    : batch(batch_size), seq(seq_len), checkpointing(checkpointing_mode) {
  const int64_t b = batch, t = seq, c = config.dim;
  auto alloc = [&](const Shape& shape, DType type) {
    return backend.empty(shape, type, MemoryCategory::kActivations);
  };
  auto alloc_block_tensor = [&](BlockShape shape) {
    switch (shape) {
      case BlockShape::kRowStats:
        return alloc({b, t}, DType::kF32);
      case BlockShape::kQkv:
        return alloc({b, t, 3 * c}, dtype);
      case BlockShape::kMlp:
        return alloc({b, t, 4 * c}, dtype);
      case BlockShape::kAttention:
        return alloc({b, config.heads, t, t}, dtype);
      case BlockShape::kDim:
        break;
    }
    return alloc({b, t, c}, dtype);
  };
  tokens = alloc({b * t}, DType::kI32);
  targets = alloc({b * t}, DType::kI32);
  positions = alloc({b * t}, DType::kI32);
  std::vector<int32_t> host_positions(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b * t; ++i) host_positions[i] = static_cast<int32_t>(i % t);
  backend.copy_from_host(positions, host_positions.data());

  encoded = alloc({b, t, c}, dtype);
  blocks.resize(static_cast<size_t>(config.layers));
  for (const BlockTensor& tensor : kBlockTensors) {
    const bool per_block = kept(tensor, checkpointing);
    const Tensor shared = per_block ? Tensor() : alloc_block_tensor(tensor.shape);
    for (BlockActivations& block : blocks)
      block.*tensor.member = per_block ? alloc_block_tensor(tensor.shape) : shared;
  }
  projection = alloc({b, t, c}, dtype);
  lnf = alloc({b, t, c}, dtype);
  lnf_mean = alloc({b, t}, DType::kF32);
  lnf_rstd = alloc({b, t}, DType::kF32);
  logits = alloc({b, t, config.padded_vocab()}, dtype);
  losses = alloc({b * t}, DType::kF32);
}

GptActivationGrads::GptActivationGrads(Backend& backend, const GptConfig& config, DType dtype,
                                       int64_t batch_size, int64_t seq_len)
    : batch(batch_size), seq(seq_len) {
  const int64_t b = batch, t = seq, c = config.dim;
  auto alloc = [&](const Shape& shape) {
    return backend.empty(shape, dtype, MemoryCategory::kActivations);
  };
  residual = alloc({b, t, c});
  btc = alloc({b, t, c});
  fch_gelu = alloc({b, t, 4 * c});
  fch = alloc({b, t, 4 * c});
  qkv = fch_gelu.view(0, {b, t, 3 * c});
}

}  // namespace mixtrain
