// Why: see task_progress.h.
#include "worker/task_progress.h"

#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

namespace mixtrain::worker {

void TaskProgress::on_step(const StepProgress& step) {
  progress_.set_step(step.step);
  progress_.set_steps(step.steps);
  if (std::isfinite(step.loss)) progress_.set_train_loss(step.loss);
  progress_.set_loss_scale(step.loss_scale);
  progress_.set_tokens_per_second(step.tokens_per_second);
  progress_.set_learning_rate(step.lr);
  if (!step.skipped) progress_.set_grad_norm(step.grad_norm);
  if (step.skipped) progress_.set_overflow_steps(progress_.overflow_steps() + 1);
}

void TaskProgress::on_eval(const EvalProgress& eval) {
  if (std::isfinite(eval.val_loss)) progress_.set_val_loss(eval.val_loss);
}

bool TaskProgress::on_summary(const std::string& summary_json) {
  const nlohmann::json summary = nlohmann::json::parse(summary_json, nullptr, false);
  if (!summary.is_object()) return false;
  const auto number = [&](const char* key) {
    const auto found = summary.find(key);
    return found != summary.end() && found->is_number() ? std::optional(found->get<double>())
                                                         : std::nullopt;
  };
  const std::optional<double> steps = number("steps");
  if (!steps || *steps <= double(progress_.step())) return true;  // the steps said it all
  progress_.set_step(static_cast<int64_t>(*steps));
  if (const auto loss = number("final_train_loss")) progress_.set_train_loss(*loss);
  if (const auto loss = number("final_val_loss")) progress_.set_val_loss(*loss);
  if (const auto scale = number("loss_scale")) progress_.set_loss_scale(*scale);
  return true;
}

}  // namespace mixtrain::worker
