// Why: see adamw.h.
#include "engine/optim/adamw.h"

#include <cmath>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

void check_hyper(const AdamWHyper& hyper, int64_t step, float grad_scale) {
  const auto non_negative = [](float x) { return std::isfinite(x) && x >= 0.0f; };
  const auto beta_ok = [](float b) { return b >= 0.0f && b < 1.0f; };
  MIXTRAIN_CHECK_ARG(non_negative(hyper.lr),
                     "adamw_step: lr must be finite and >= 0, got " + std::to_string(hyper.lr));
  MIXTRAIN_CHECK_ARG(beta_ok(hyper.beta1),
                     "adamw_step: beta1 must be in [0, 1), got " + std::to_string(hyper.beta1));
  MIXTRAIN_CHECK_ARG(beta_ok(hyper.beta2),
                     "adamw_step: beta2 must be in [0, 1), got " + std::to_string(hyper.beta2));
  MIXTRAIN_CHECK_ARG(non_negative(hyper.eps),
                     "adamw_step: eps must be finite and >= 0, got " + std::to_string(hyper.eps));
  MIXTRAIN_CHECK_ARG(non_negative(hyper.weight_decay),
                     "adamw_step: weight_decay must be finite and >= 0, got " +
                         std::to_string(hyper.weight_decay));
  MIXTRAIN_CHECK_ARG(step >= 1, "adamw_step: step " + std::to_string(step) + " must be >= 1");
  MIXTRAIN_CHECK_ARG(std::isfinite(grad_scale), "adamw_step: grad_scale must be finite, got " +
                                                    std::to_string(grad_scale));
}

}  // namespace

void adamw_step(Backend& backend, std::span<const AdamWParam> params, const AdamWHyper& hyper,
                int64_t step, float grad_scale) {
  check_hyper(hyper, step, grad_scale);
  AdamWConfig config;
  config.lr = hyper.lr;
  config.beta1 = hyper.beta1;
  config.beta2 = hyper.beta2;
  config.eps = hyper.eps;
  config.step = step;
  config.grad_scale = grad_scale;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWParam& p = params[i];
    config.weight_decay = p.decay ? hyper.weight_decay : 0.0f;
    try {
      backend.adamw_update(p.master, p.m, p.v, p.grad, config,
                           p.param_out.defined() ? &p.param_out : nullptr);
    } catch (const EngineError& error) {
      throw EngineError(error.code(),
                        "adamw_step: parameter " + std::to_string(i) + ": " + error.what());
    }
  }
}

}  // namespace mixtrain
