// Why: the precision section of the job spec (DESIGN.md §4) says how the
// loss is scaled; this is that section's engine-side form, checked once
// before any work starts so an impossible value fails with the key's name
// instead of surfacing as a diverged run thousands of steps later.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/config/job_spec.h"

namespace mixtrain {

// The job spec's enums (config/job_spec.h) are the scaler's: dynamic is
// PyTorch GradScaler with DeepSpeed's hysteresis and min_scale; static a
// fixed scale (init_scale); none scale 1. Steps with inf/NaN are skipped in
// every mode.
using config::LossScaleMode;
using config::OnMinScale;

struct LossScalerConfig {
  LossScaleMode mode = LossScaleMode::kDynamic;
  float init_scale = 65536.0f;    // 2^16, GradScaler's default
  // Applied as PyTorch's GradScaler does: the fp32 scale times the double
  // factor, rounded to fp32 once.
  double growth_factor = 2.0;     // scale *= this after growth_interval clean steps
  double backoff_factor = 0.5;    // scale *= this on a (non-deferred) overflow
  int64_t growth_interval = 2000; // consecutive clean steps before a growth
  int64_t hysteresis = 1;         // overflows needed for one backoff (DeepSpeed)
  float min_scale = 1.0f;         // the dynamic scale never goes below this
  std::optional<float> max_scale;  // nor, by growth, above this
  OnMinScale on_min_scale = OnMinScale::kFail;

  // Throws EngineError(kInvalidArgument) naming the first bad field by its
  // job-spec key (e.g. "precision.growth_factor") unless: every float is
  // finite, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1,
  // hysteresis >= 1, min_scale > 0, init_scale >= min_scale and, when set,
  // max_scale >= init_scale.
  void validate() const;
};

}  // namespace mixtrain
