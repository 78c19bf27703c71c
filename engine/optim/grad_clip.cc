// Why: see grad_clip.h.
#include "engine/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

float clip_coefficient(double global_norm, double max_norm) {
  MIXTRAIN_CHECK_ARG(std::isfinite(global_norm) && global_norm >= 0.0,
                     "clip_coefficient: gradient norm " + std::to_string(global_norm) +
                         " must be finite and >= 0");
  MIXTRAIN_CHECK_ARG(std::isfinite(max_norm) && max_norm >= 0.0,
                     "train.grad_clip must be finite and >= 0, got " + std::to_string(max_norm));
  if (max_norm == 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (global_norm + kClipNormEpsilon)));
}

}  // namespace mixtrain
