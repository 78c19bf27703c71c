// Why: clipping by the global gradient norm, as torch.nn.utils.
// clip_grad_norm_ does it, expressed as the one factor to multiply every
// gradient by, so the trainer can fold it into AdamW's grad_scale together
// with the loss-scale unscaling instead of making another pass over memory.
#pragma once

namespace mixtrain {

// torch.nn.utils.clip_grad_norm_'s additive epsilon in the denominator.
inline constexpr double kClipNormEpsilon = 1e-6;

// min(1, max_norm / (global_norm + 1e-6)), computed in double and returned
// as fp32; 1 when max_norm == 0 (clipping disabled). global_norm is the L2
// norm over all gradients of all ranks, already unscaled. Throws
// EngineError(kInvalidArgument) unless global_norm is finite and >= 0
// (steps with inf/NaN gradients are skipped before clipping) and max_norm
// is finite and >= 0.
float clip_coefficient(double global_norm, double max_norm);

}  // namespace mixtrain
