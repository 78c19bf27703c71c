// Why: mixed-precision AdamW over a model's parameter list. The math of
// one tensor is Backend::adamw_update (torch.optim.AdamW semantics on fp32
// master weights, m and v); this applies it to every parameter with the
// step's shared hyperparameters, giving weight decay only to parameters
// that take it (as nanoGPT/llm.c exclude biases and LayerNorm weights).
// The optimizer owns no state: the tensors belong to the caller (the ZeRO
// partitioner decides where they live).
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/backend.h"

namespace mixtrain {

// One parameter (or one rank's shard of it) and its optimizer state.
struct AdamWParam {
  Tensor master;     // fp32 master weights, updated in place
  Tensor m;          // fp32 first moment, same numel
  Tensor v;          // fp32 second moment, same numel
  Tensor grad;       // gradient in any compute dtype, same numel (still scaled)
  Tensor param_out;  // optional compute-dtype copy of the weights; undefined: none
  bool decay = true; // false: weight_decay 0 for this parameter
};

// One AdamW step on every parameter: Backend::adamw_update with config
// (its step is 1-based, for bias correction; its grad_scale multiplies
// each gradient first: 1/loss_scale times the clip coefficient), its
// weight_decay only where decay is true. Throws
// EngineError(kInvalidArgument) unless lr, eps and weight_decay are finite
// and >= 0, betas are in [0, 1), step >= 1 and grad_scale is finite; a
// parameter's shape or dtype error names its index in `params`.
void adamw_step(Backend& backend, std::span<const AdamWParam> params, const AdamWConfig& config);

}  // namespace mixtrain
