// Why: allocation of the activation tensors declared in gpt_activations.h.
#include "engine/model/gpt_activations.h"

#include <vector>

namespace mixtrain {

GptActivations::GptActivations(Backend& backend, const GptConfig& config, DType dtype,
                               int64_t batch_size, int64_t seq_len)
    : batch(batch_size), seq(seq_len) {
  const int64_t b = batch, t = seq, c = config.dim;
  auto alloc = [&](const Shape& shape, DType type) {
    return backend.empty(shape, type, MemoryCategory::kActivations);
  };
  tokens = alloc({b * t}, DType::kI32);
  targets = alloc({b * t}, DType::kI32);
  positions = alloc({b * t}, DType::kI32);
  std::vector<int32_t> host_positions(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b * t; ++i) host_positions[i] = static_cast<int32_t>(i % t);
  backend.copy_from_host(positions, host_positions.data());

  encoded = alloc({b, t, c}, dtype);
  blocks.resize(static_cast<size_t>(config.layers));
  for (BlockActivations& block : blocks) {
    block.ln1 = alloc({b, t, c}, dtype);
    block.ln1_mean = alloc({b, t}, DType::kF32);
    block.ln1_rstd = alloc({b, t}, DType::kF32);
    block.qkv = alloc({b, t, 3 * c}, dtype);
    block.att = alloc({b, config.heads, t, t}, dtype);
    block.atty = alloc({b, t, c}, dtype);
    block.residual2 = alloc({b, t, c}, dtype);
    block.ln2 = alloc({b, t, c}, dtype);
    block.ln2_mean = alloc({b, t}, DType::kF32);
    block.ln2_rstd = alloc({b, t}, DType::kF32);
    block.fch = alloc({b, t, 4 * c}, dtype);
    block.fch_gelu = alloc({b, t, 4 * c}, dtype);
    block.residual3 = alloc({b, t, c}, dtype);
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
