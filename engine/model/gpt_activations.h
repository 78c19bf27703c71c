// Why: the memory of one GPT forward/backward, allocated once per batch
// shape (B,T) and reused every step. GptActivations holds what the forward
// writes and the backward reads (compute dtype; LayerNorm mean/rstd and the
// per-position losses fp32); GptActivationGrads holds the backward's
// scratch gradients, allocated only when a backward runs. Both count as
// MemoryCategory::kActivations.
// With activation checkpointing, the block tensors the backward recomputes
// are not kept per block: every block's copy of them is the same memory,
// one block's worth, which the forward overwrites block by block and the
// backward refills (Gpt::recompute_block) before each block's backward.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/config/job_spec.h"
#include "engine/model/gpt_config.h"

namespace mixtrain {

// The saved tensors of one transformer block; x is the block's input
// residual (the previous block's residual3, or the embeddings). The
// comments say which checkpointing modes keep each one per block (none
// keeps all); the others are recomputed.
struct BlockActivations {
  Tensor ln1;        // (B,T,C)  ln_1(x)
  Tensor ln1_mean;   // (B,T)    fp32                          selective
  Tensor ln1_rstd;   // (B,T)    fp32                          selective
  Tensor qkv;        // (B,T,3C) c_attn(ln1)                   selective
  Tensor att;        // (B,NH,T,T) softmax probabilities
  Tensor atty;       // (B,T,C)  attention output before c_proj
  Tensor residual2;  // (B,T,C)  x + attn.c_proj(atty)         selective
  Tensor ln2;        // (B,T,C)  ln_2(residual2)
  Tensor ln2_mean;   // (B,T)    fp32                          selective
  Tensor ln2_rstd;   // (B,T)    fp32                          selective
  Tensor fch;        // (B,T,4C) c_fc(ln2)                     selective
  Tensor fch_gelu;   // (B,T,4C) gelu(fch)
  Tensor residual3;  // (B,T,C)  residual2 + mlp.c_proj(fch_gelu)  selective, blocks
};

// The bytes per position (one of the B*T rows) of a GptActivations and a
// GptActivationGrads for sequences of `seq` and compute dtype `dtype`:
// every tensor they allocate, from the same tables they allocate by. The
// memory planner sizes a rank's activations by it.
int64_t activation_bytes_per_position(const GptConfig& config, DType dtype, int64_t seq,
                                      config::ActivationCheckpointing checkpointing);

struct GptActivations {
  // Allocates every tensor for batches of shape (batch, seq), the block
  // tensors `checkpointing` recomputes once for all blocks, and fills
  // `positions`; dtype is the compute dtype.
  GptActivations(Backend& backend, const GptConfig& config, DType dtype, int64_t batch, int64_t seq,
                 config::ActivationCheckpointing checkpointing);

  int64_t batch;
  int64_t seq;
  config::ActivationCheckpointing checkpointing;
  Tensor tokens;     // (B*T) int32, the model's copy of the input ids
  Tensor targets;    // (B*T) int32, the model's copy of the targets
  Tensor positions;  // (B*T) int32, t for row (b,t): wpe's ids
  Tensor encoded;    // (B,T,C)  wte[tokens] + wpe[positions]
  std::vector<BlockActivations> blocks;
  Tensor projection;  // (B,T,C) c_proj outputs before the residual add; not kept for backward
  Tensor lnf;        // (B,T,C)
  Tensor lnf_mean;   // (B,T) fp32
  Tensor lnf_rstd;   // (B,T) fp32
  Tensor logits;     // (B,T,V); the backward overwrites it with dlogits
  Tensor losses;     // (B*T) fp32 per-position cross-entropy
};

struct GptActivationGrads {
  // Allocates the scratch gradients for batches of shape (batch, seq).
  GptActivationGrads(Backend& backend, const GptConfig& config, DType dtype, int64_t batch,
                     int64_t seq);

  int64_t batch;
  int64_t seq;
  Tensor residual;  // (B,T,C)  gradient of the residual stream
  Tensor btc;       // (B,T,C)  gradient of a LayerNorm output or of atty
  Tensor fch_gelu;  // (B,T,4C) gradient of fch_gelu
  Tensor fch;       // (B,T,4C) gradient of fch
  // (B,T,3C) gradient of qkv; shares fch_gelu's memory, which is dead by
  // the time the attention backward runs.
  Tensor qkv;
};

}  // namespace mixtrain
