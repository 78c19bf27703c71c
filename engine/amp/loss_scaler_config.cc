// Why: validation of the loss-scaling settings, kept apart from the
// scaler's step logic.
#include "engine/amp/loss_scaler_config.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

void check_field(bool ok, const char* key, const char* requirement, double value) {
  MIXTRAIN_CHECK_ARG(ok, std::string("precision.") + key + " must be " + requirement +
                             ", got " + number(value));
}

}  // namespace

void LossScalerConfig::validate() const {
  check_field(std::isfinite(init_scale), "init_scale", "finite", init_scale);
  check_field(std::isfinite(growth_factor) && growth_factor > 1.0, "growth_factor",
              "finite and > 1", growth_factor);
  check_field(backoff_factor > 0.0 && backoff_factor < 1.0, "backoff_factor", "in (0, 1)",
              backoff_factor);
  check_field(growth_interval >= 1, "growth_interval", ">= 1",
              static_cast<double>(growth_interval));
  check_field(hysteresis >= 1, "hysteresis", ">= 1", static_cast<double>(hysteresis));
  check_field(std::isfinite(min_scale) && min_scale > 0.0f, "min_scale", "finite and > 0",
              min_scale);
  check_field(init_scale >= min_scale, "init_scale",
              (">= precision.min_scale (" + number(min_scale) + ")").c_str(), init_scale);
  if (max_scale) {
    check_field(std::isfinite(*max_scale) && *max_scale >= init_scale, "max_scale",
                ("finite and >= precision.init_scale (" + number(init_scale) + ")").c_str(),
                *max_scale);
  }
}

}  // namespace mixtrain
