// Why: the step logic of the loss scaler (semantics in loss_scaler.h).
#include "engine/amp/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/amp/scale_format.h"
#include "engine/common/error.h"

namespace mixtrain {

namespace {

// scale * factor as GradScaler's _amp_update_scale_ computes it: the fp32
// scale times the double factor, rounded to fp32 once.
float times(float scale, double factor) {
  return static_cast<float>(static_cast<double>(scale) * factor);
}

// The scale a scaler starts at; static and none keep it for good.
float initial_scale(const LossScalerConfig& config) {
  return config.mode == LossScaleMode::kNone ? 1.0f : config.init_scale;
}

[[noreturn]] void fail_at_min_scale(int64_t step, std::string_view tensor, float min_scale) {
  const std::string where =
      tensor.empty() ? std::string("the gradients") : std::string(tensor) + " grad";
  throw EngineError(
      ErrorCode::kFailedPrecondition,
      "step " + std::to_string(step) + ": overflow (inf/NaN) in " + where +
          " with the loss scale already at precision.min_scale " + format_scale(min_scale) +
          "; training cannot make progress: lower the learning rate, use bf16 compute "
          "(precision.compute: bf16), or set precision.on_min_scale: continue to skip such "
          "steps");
}

}  // namespace

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  config_.validate();
  state_.scale = initial_scale(config_);
  state_.hysteresis_left = config_.hysteresis;
}

StepDecision LossScaler::update(bool found_nonfinite, int64_t step,
                                std::string_view nonfinite_tensor) {
  if (found_nonfinite && config_.mode == LossScaleMode::kDynamic) {
    return update_dynamic(step, nonfinite_tensor);
  }
  StepDecision decision;
  decision.old_scale = state_.scale;
  decision.new_scale = state_.scale;
  if (found_nonfinite) {
    decision.skip = true;
    ++state_.overflow_steps;
  } else if (config_.mode == LossScaleMode::kDynamic) {
    grow_after_clean_step(decision);
  }
  return decision;
}

StepDecision LossScaler::update_dynamic(int64_t step, std::string_view nonfinite_tensor) {
  StepDecision decision;
  decision.skip = true;
  decision.old_scale = state_.scale;
  if (state_.hysteresis_left > 1) {
    decision.backoff_deferred = true;
    --state_.hysteresis_left;
  } else if (state_.scale <= config_.min_scale) {
    if (config_.on_min_scale == OnMinScale::kFail) {
      fail_at_min_scale(step, nonfinite_tensor, config_.min_scale);
    }
    state_.scale = config_.min_scale;
  } else {
    state_.scale = std::max(times(state_.scale, config_.backoff_factor), config_.min_scale);
  }
  state_.growth_tracker = 0;
  ++state_.overflow_steps;
  decision.new_scale = state_.scale;
  decision.scale_changed = decision.new_scale != decision.old_scale;
  return decision;
}

void LossScaler::grow_after_clean_step(StepDecision& decision) {
  if (++state_.growth_tracker < config_.growth_interval) return;
  state_.growth_tracker = 0;
  state_.hysteresis_left = config_.hysteresis;
  float grown = times(state_.scale, config_.growth_factor);
  if (!std::isfinite(grown)) return;
  if (config_.max_scale) grown = std::min(grown, *config_.max_scale);
  decision.scale_changed = grown != state_.scale;
  state_.scale = grown;
  decision.new_scale = grown;
}

void LossScaler::restore(const LossScalerState& state) {
  const std::string what = "loss scaler state: ";
  MIXTRAIN_CHECK_ARG(state.overflow_steps >= 0,
                     what + "overflow_steps " + std::to_string(state.overflow_steps) +
                         " must be >= 0");
  if (config_.mode == LossScaleMode::kDynamic) {
    MIXTRAIN_CHECK_ARG(std::isfinite(state.scale) && state.scale >= config_.min_scale,
                       what + "scale " + format_scale(state.scale) +
                           " must be finite and >= precision.min_scale " +
                           format_scale(config_.min_scale));
    MIXTRAIN_CHECK_ARG(state.growth_tracker >= 0 &&
                           state.growth_tracker < config_.growth_interval,
                       what + "growth_tracker " + std::to_string(state.growth_tracker) +
                           " must be in [0, precision.growth_interval " +
                           std::to_string(config_.growth_interval) + ")");
    MIXTRAIN_CHECK_ARG(state.hysteresis_left >= 1 &&
                           state.hysteresis_left <= config_.hysteresis,
                       what + "hysteresis_left " + std::to_string(state.hysteresis_left) +
                           " must be in [1, precision.hysteresis " +
                           std::to_string(config_.hysteresis) + "]");
  } else {
    MIXTRAIN_CHECK_ARG(state.scale == initial_scale(config_),
                       what + "scale " + format_scale(state.scale) + " differs from the " +
                           std::string(config::enum_name(config_.mode)) + " mode's fixed scale " +
                           format_scale(initial_scale(config_)));
  }
  state_ = state;
}

}  // namespace mixtrain
