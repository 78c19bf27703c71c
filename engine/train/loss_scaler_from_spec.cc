// Why: field-by-field mapping of the precision section (see the header).
#include "engine/train/loss_scaler_from_spec.h"

namespace mixtrain {

LossScalerConfig loss_scaler_config(const config::PrecisionSpec& precision) {
  LossScalerConfig out;
  out.mode = config::effective_loss_scale(precision);
  out.init_scale = static_cast<float>(precision.init_scale);
  out.growth_factor = precision.growth_factor;
  out.backoff_factor = precision.backoff_factor;
  out.growth_interval = precision.growth_interval;
  out.hysteresis = precision.hysteresis;
  out.min_scale = static_cast<float>(precision.min_scale);
  if (precision.max_scale) out.max_scale = static_cast<float>(*precision.max_scale);
  out.on_min_scale = precision.on_min_scale;
  return out;
}

}  // namespace mixtrain
