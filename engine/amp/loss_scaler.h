// Why: fp16 gradients underflow unless the loss is multiplied by a large
// scale before backward; the scale must shrink when gradients overflow and
// grow back when they stay finite. This is that policy, separate from the
// tensors: the trainer unscales and checks the gradients (Backend::
// unscale_and_check), all ranks agree on found_nonfinite, and update() says
// whether to skip the step and which scale the next step uses.
//
// Dynamic mode is PyTorch's GradScaler (torch.cuda.amp.GradScaler, 1.13):
// on inf/NaN the step is skipped, scale *= backoff_factor and the growth
// counter restarts; after growth_interval consecutive clean steps scale *=
// growth_factor (kept only if finite) and the counter restarts. The
// factors are doubles applied to the fp32 scale and rounded once, as
// GradScaler's _amp_update_scale_ does, so a backoff_factor of 0.8 gives
// GradScaler's scale sequence to the bit.
// On top of it, DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/
// loss_scaler.py, update_scale, consecutive_hysteresis=False) gives:
//  * hysteresis H (DeepSpeed "delayed_shift"): a counter hysteresis_left
//    starts at H. An overflow while hysteresis_left > 1 only decrements it
//    (the step is skipped, the scale kept); an overflow while it is 1 backs
//    the scale off, and it stays 1, so further overflows back off at once.
//    It returns to H only when a growth happens (growth_interval clean
//    steps since the last overflow), not on any single clean step.
//  * min_scale: a backoff gives max(scale * backoff_factor, min_scale); a
//    backoff due while the scale already equals min_scale raises (DeepSpeed's
//    raise_error_at_min_scale, here on_min_scale: fail) or, with continue,
//    keeps min_scale and skips the step. An overflow absorbed by hysteresis
//    never raises.
//  * max_scale (optional; the LLaMA recipe caps at 2^17): a growth gives
//    min(scale * growth_factor, max_scale).
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/amp/loss_scaler_config.h"

namespace mixtrain {

// What to do with one step, given whether its gradients held inf/NaN.
struct StepDecision {
  bool skip = false;              // do not apply this step's update
  bool scale_changed = false;     // new_scale != old_scale
  bool backoff_deferred = false;  // an overflow absorbed by hysteresis: scale kept
  float old_scale = 1.0f;         // the scale this step's gradients carry
  float new_scale = 1.0f;         // the scale for the next step
};

// Everything needed to resume the scaler exactly (saved in checkpoints).
struct LossScalerState {
  float scale = 1.0f;
  int64_t growth_tracker = 0;   // consecutive clean steps since the last growth/overflow
  int64_t hysteresis_left = 1;  // overflows left before the next one backs off
  int64_t overflow_steps = 0;   // steps skipped for inf/NaN so far, every mode
  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  // Validates config (see LossScalerConfig::validate) and starts at
  // init_scale (dynamic, static) or 1 (none).
  explicit LossScaler(const LossScalerConfig& config);

  // The factor to multiply the loss by before backward.
  float scale() const { return state_.scale; }
  // Steps skipped for inf/NaN so far.
  int64_t overflow_steps() const { return state_.overflow_steps; }
  const LossScalerConfig& config() const { return config_; }

  // Records the outcome of `step` (used only in messages) and returns the
  // decision. A step with found_nonfinite is skipped in every mode and
  // counted; only dynamic mode changes the scale (see the file comment).
  // When a dynamic backoff is due at min_scale with on_min_scale: fail,
  // throws EngineError(kFailedPrecondition) naming `step` and
  // `nonfinite_tensor` (the first tensor holding inf/NaN, "" if unknown)
  // and leaves the scaler unchanged.
  StepDecision update(bool found_nonfinite, int64_t step, std::string_view nonfinite_tensor = {});

  // The scaler's whole mutable state; restore(state()) on a scaler with the
  // same config makes every later decision identical.
  LossScalerState state() const { return state_; }
  // Replaces the state. Throws EngineError(kInvalidArgument) naming the
  // field unless it fits the config: dynamic: a finite scale >= min_scale,
  // 0 <= growth_tracker < growth_interval, 1 <= hysteresis_left <=
  // hysteresis; static and none: the mode's fixed scale; overflow_steps >= 0.
  void restore(const LossScalerState& state);

 private:
  StepDecision update_dynamic(int64_t step, std::string_view nonfinite_tensor);
  void grow_after_clean_step(StepDecision& decision);

  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace mixtrain
