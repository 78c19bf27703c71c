// Why: see lr_schedule.h.
#include "engine/optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

LrSchedule::LrSchedule(const LrScheduleConfig& config) : config_(config) {
  MIXTRAIN_CHECK_ARG(std::isfinite(config.lr) && config.lr >= 0.0,
                     "train.lr must be finite and >= 0, got " + std::to_string(config.lr));
  MIXTRAIN_CHECK_ARG(config.min_lr >= 0.0 && config.min_lr <= config.lr,
                     "train.min_lr must be in [0, train.lr " + std::to_string(config.lr) +
                         "], got " + std::to_string(config.min_lr));
  MIXTRAIN_CHECK_ARG(config.total_steps >= 1,
                     "train.steps must be >= 1, got " + std::to_string(config.total_steps));
  MIXTRAIN_CHECK_ARG(config.warmup_steps >= 0 && config.warmup_steps <= config.total_steps,
                     "train.warmup_steps must be in [0, train.steps " +
                         std::to_string(config.total_steps) + "], got " +
                         std::to_string(config.warmup_steps));
}

double LrSchedule::lr_at(int64_t step) const {
  MIXTRAIN_CHECK_ARG(step >= 0, "lr_at: step " + std::to_string(step) + " must be >= 0");
  const double lr = config_.lr;
  const double min_lr = config_.min_lr;
  const int64_t warmup = config_.warmup_steps;
  if (step < warmup) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (step >= config_.total_steps) return min_lr;
  const double ratio = static_cast<double>(step - warmup) /
                       static_cast<double>(config_.total_steps - warmup);
  const double coefficient = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return min_lr + coefficient * (lr - min_lr);
}

}  // namespace mixtrain
