// Why: see adamw.h.
#include "engine/optim/adamw.h"

#include <cmath>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

void check_config(const AdamWConfig& config) {
  const auto non_negative = [](float x) { return std::isfinite(x) && x >= 0.0f; };
  const auto beta_ok = [](float b) { return b >= 0.0f && b < 1.0f; };
  MIXTRAIN_CHECK_ARG(non_negative(config.lr),
                     "adamw_step: lr must be finite and >= 0, got " + std::to_string(config.lr));
  MIXTRAIN_CHECK_ARG(beta_ok(config.beta1),
                     "adamw_step: beta1 must be in [0, 1), got " + std::to_string(config.beta1));
  MIXTRAIN_CHECK_ARG(beta_ok(config.beta2),
                     "adamw_step: beta2 must be in [0, 1), got " + std::to_string(config.beta2));
  MIXTRAIN_CHECK_ARG(non_negative(config.eps),
                     "adamw_step: eps must be finite and >= 0, got " + std::to_string(config.eps));
  MIXTRAIN_CHECK_ARG(non_negative(config.weight_decay),
                     "adamw_step: weight_decay must be finite and >= 0, got " +
                         std::to_string(config.weight_decay));
  MIXTRAIN_CHECK_ARG(config.step >= 1,
                     "adamw_step: step " + std::to_string(config.step) + " must be >= 1");
  MIXTRAIN_CHECK_ARG(std::isfinite(config.grad_scale),
                     "adamw_step: grad_scale must be finite, got " +
                         std::to_string(config.grad_scale));
}

}  // namespace

void adamw_step(Backend& backend, std::span<const AdamWParam> params, const AdamWConfig& config) {
  check_config(config);
  AdamWConfig without_decay = config;
  without_decay.weight_decay = 0.0f;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWParam& p = params[i];
    try {
      backend.adamw_update(p.master, p.m, p.v, p.grad, p.decay ? config : without_decay,
                           p.param_out.defined() ? &p.param_out : nullptr);
    } catch (const EngineError& error) {
      throw EngineError(error.code(),
                        "adamw_step: parameter " + std::to_string(i) + ": " + error.what());
    }
  }
}

}  // namespace mixtrain
