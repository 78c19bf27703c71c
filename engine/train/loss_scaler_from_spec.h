// Why: the job spec's precision section and the loss scaler's config are
// two shapes of the same settings; this is the one place that maps them,
// resolving the spec's "unset" default (dynamic for fp16, none otherwise).
#pragma once

#include "engine/amp/loss_scaler_config.h"
#include "engine/config/job_spec.h"

namespace mixtrain {

// The scaler config `precision` describes, with effective_loss_scale's mode.
// Does not validate (LossScaler's constructor does).
LossScalerConfig loss_scaler_config(const config::PrecisionSpec& precision);

}  // namespace mixtrain
