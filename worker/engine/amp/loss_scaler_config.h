// Why: the precision section of the job spec (DESIGN.md §4) says how the
// loss is scaled; this is that section's engine-side form, checked once
// before any work starts so an impossible value fails with the key's name
// instead of surfacing as a diverged run thousands of steps later.
#pragma once

#include <cstdint>
#include <string_view>

#include "numerics/dtype.h"

namespace mixtrain {

// dynamic: PyTorch GradScaler with DeepSpeed's hysteresis and min_scale.
// static:  a fixed scale (init_scale); steps with inf/NaN are skipped.
// none:    scale 1; steps with inf/NaN are still skipped.
enum class LossScaleMode { kDynamic, kStatic, kNone };

// What a dynamic scaler does when an overflow needs a backoff while the
// scale already sits at min_scale.
enum class OnMinScale { kFail, kContinue };

struct LossScalerConfig {
  LossScaleMode mode = LossScaleMode::kDynamic;
  float init_scale = 65536.0f;    // 2^16, GradScaler's default
  float growth_factor = 2.0f;     // scale *= this after growth_interval clean steps
  float backoff_factor = 0.5f;    // scale *= this on a (non-deferred) overflow
  int64_t growth_interval = 2000; // consecutive clean steps before a growth
  int64_t hysteresis = 1;         // overflows needed for one backoff (DeepSpeed)
  float min_scale = 1.0f;         // the dynamic scale never goes below this
  OnMinScale on_min_scale = OnMinScale::kFail;

  // Throws EngineError(kInvalidArgument) naming the first bad field by its
  // job-spec key (e.g. "precision.growth_factor") unless: every float is
  // finite, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1,
  // hysteresis >= 1, min_scale > 0 and init_scale >= min_scale.
  void validate() const;
};

// The mode used when the job spec names none: dynamic for fp16 compute
// (its 5-bit exponent underflows small gradients), none otherwise (fp32 and
// bf16 have fp32's exponent range).
LossScaleMode default_loss_scale_mode(DType compute);

// "dynamic", "static", "none" (the job spec's spellings).
const char* loss_scale_mode_name(LossScaleMode mode);
// Inverse of loss_scale_mode_name; throws EngineError(kInvalidArgument)
// naming precision.loss_scale and the unknown string.
LossScaleMode parse_loss_scale_mode(std::string_view name);

// "fail", "continue".
const char* on_min_scale_name(OnMinScale action);
// Inverse of on_min_scale_name; throws EngineError(kInvalidArgument)
// naming precision.on_min_scale and the unknown string.
OnMinScale parse_on_min_scale(std::string_view name);

}  // namespace mixtrain
