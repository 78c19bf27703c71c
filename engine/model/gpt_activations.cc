// Why: allocation of the activation tensors declared in gpt_activations.h,
// each listed once in a table that also gives the planner its bytes.
#include "engine/model/gpt_activations.h"

#include <vector>

namespace mixtrain {

namespace {

using config::ActivationCheckpointing;

// The shape of an activation tensor for (B,T): int32 ids or fp32 values
// per position, flat (B*T) or (B,T); a row of C, 3C, 4C or Vp values of
// the compute dtype; or (B,NH,T,T) attention probabilities.
enum class RowShape { kIds, kLosses, kRowStats, kDim, kQkv, kMlp, kVocab, kAttention };

// One tensor of BlockActivations: its shape, and whether each
// checkpointing mode keeps it per block.
struct BlockTensor {
  Tensor BlockActivations::*member;
  RowShape shape;
  bool kept_by_selective;
  bool kept_by_blocks;
};

constexpr BlockTensor kBlockTensors[] = {
    {&BlockActivations::ln1, RowShape::kDim, false, false},
    {&BlockActivations::ln1_mean, RowShape::kRowStats, true, false},
    {&BlockActivations::ln1_rstd, RowShape::kRowStats, true, false},
    {&BlockActivations::qkv, RowShape::kQkv, true, false},
    {&BlockActivations::att, RowShape::kAttention, false, false},
    {&BlockActivations::atty, RowShape::kDim, false, false},
    {&BlockActivations::residual2, RowShape::kDim, true, false},
    {&BlockActivations::ln2, RowShape::kDim, false, false},
    {&BlockActivations::ln2_mean, RowShape::kRowStats, true, false},
    {&BlockActivations::ln2_rstd, RowShape::kRowStats, true, false},
    {&BlockActivations::fch, RowShape::kMlp, true, false},
    {&BlockActivations::fch_gelu, RowShape::kMlp, false, false},
    {&BlockActivations::residual3, RowShape::kDim, true, true},
};

// The tensors of GptActivations outside the blocks.
struct ModelTensor {
  Tensor GptActivations::*member;
  RowShape shape;
};

constexpr ModelTensor kModelTensors[] = {
    {&GptActivations::tokens, RowShape::kIds},
    {&GptActivations::targets, RowShape::kIds},
    {&GptActivations::positions, RowShape::kIds},
    {&GptActivations::encoded, RowShape::kDim},
    {&GptActivations::projection, RowShape::kDim},
    {&GptActivations::lnf, RowShape::kDim},
    {&GptActivations::lnf_mean, RowShape::kRowStats},
    {&GptActivations::lnf_rstd, RowShape::kRowStats},
    {&GptActivations::logits, RowShape::kVocab},
    {&GptActivations::losses, RowShape::kLosses},
};

// The tensors of GptActivationGrads that have memory of their own (qkv
// is a view of fch_gelu).
struct GradTensor {
  Tensor GptActivationGrads::*member;
  RowShape shape;
};

constexpr GradTensor kGradTensors[] = {
    {&GptActivationGrads::residual, RowShape::kDim},
    {&GptActivationGrads::btc, RowShape::kDim},
    {&GptActivationGrads::fch_gelu, RowShape::kMlp},
    {&GptActivationGrads::fch, RowShape::kMlp},
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

// The dtype of a tensor of `shape` for compute dtype `dtype`.
DType dtype_of(RowShape shape, DType dtype) {
  switch (shape) {
    case RowShape::kIds:
      return DType::kI32;
    case RowShape::kLosses:
    case RowShape::kRowStats:
      return DType::kF32;
    default:
      return dtype;
  }
}

// The shape of a tensor of `shape` for batches (b, t).
Shape shape_of(RowShape shape, const GptConfig& config, int64_t b, int64_t t) {
  const int64_t c = config.dim;
  switch (shape) {
    case RowShape::kIds:
    case RowShape::kLosses:
      return {b * t};
    case RowShape::kRowStats:
      return {b, t};
    case RowShape::kQkv:
      return {b, t, 3 * c};
    case RowShape::kMlp:
      return {b, t, 4 * c};
    case RowShape::kVocab:
      return {b, t, config.padded_vocab()};
    case RowShape::kAttention:
      return {b, config.heads, t, t};
    case RowShape::kDim:
      break;
  }
  return {b, t, c};
}

// The bytes of one position's row of a tensor of `shape`: its bytes for
// one batch row of one position.
int64_t row_bytes(RowShape shape, const GptConfig& config, DType dtype, int64_t seq) {
  return shape_numel(shape_of(shape, config, 1, seq)) / seq *
         static_cast<int64_t>(dtype_size(dtype_of(shape, dtype)));
}

// A tensor of `shape` for batches (b, t), counted as activations.
Tensor allocate(Backend& backend, RowShape shape, const GptConfig& config, DType dtype, int64_t b,
                int64_t t) {
  return backend.empty(shape_of(shape, config, b, t), dtype_of(shape, dtype),
                       MemoryCategory::kActivations);
}

// One block's saved tensors, in bytes per position: those `checkpointing`
// keeps per block, and those it recomputes into the one copy all blocks
// share.
struct BlockActivationBytes {
  int64_t kept = 0;
  int64_t shared = 0;
};
BlockActivationBytes block_activation_bytes(const GptConfig& config, DType dtype, int64_t seq,
                                            ActivationCheckpointing checkpointing) {
  BlockActivationBytes out;
  for (const BlockTensor& tensor : kBlockTensors)
    (kept(tensor, checkpointing) ? out.kept : out.shared) +=
        row_bytes(tensor.shape, config, dtype, seq);
  return out;
}

}  // namespace

int64_t activation_bytes_per_position(const GptConfig& config, DType dtype, int64_t seq,
                                      ActivationCheckpointing checkpointing) {
  const BlockActivationBytes block = block_activation_bytes(config, dtype, seq, checkpointing);
  int64_t bytes = config.layers * block.kept + block.shared;
  for (const ModelTensor& tensor : kModelTensors)
    bytes += row_bytes(tensor.shape, config, dtype, seq);
  for (const GradTensor& tensor : kGradTensors)
    bytes += row_bytes(tensor.shape, config, dtype, seq);
  return bytes;
}

GptActivations::GptActivations(Backend& backend, const GptConfig& config, DType dtype,
                               int64_t batch_size, int64_t seq_len,
                               ActivationCheckpointing checkpointing_mode)
    : batch(batch_size), seq(seq_len), checkpointing(checkpointing_mode) {
  const int64_t b = batch, t = seq;
  for (const ModelTensor& tensor : kModelTensors)
    this->*tensor.member = allocate(backend, tensor.shape, config, dtype, b, t);
  std::vector<int32_t> host_positions(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b * t; ++i) host_positions[i] = static_cast<int32_t>(i % t);
  backend.copy_from_host(positions, host_positions.data());

  blocks.resize(static_cast<size_t>(config.layers));
  for (const BlockTensor& tensor : kBlockTensors) {
    const bool per_block = kept(tensor, checkpointing);
    const Tensor shared =
        per_block ? Tensor() : allocate(backend, tensor.shape, config, dtype, b, t);
    for (BlockActivations& block : blocks)
      block.*tensor.member =
          per_block ? allocate(backend, tensor.shape, config, dtype, b, t) : shared;
  }
}

GptActivationGrads::GptActivationGrads(Backend& backend, const GptConfig& config, DType dtype,
                                       int64_t batch_size, int64_t seq_len)
    : batch(batch_size), seq(seq_len) {
  for (const GradTensor& tensor : kGradTensors)
    this->*tensor.member = allocate(backend, tensor.shape, config, dtype, batch, seq);
  qkv = fch_gelu.view(0, {batch, seq, 3 * config.dim});
}

}  // namespace mixtrain
