// Why: a step's values travel twice on their way to `mixtrain submit
// --follow`: from the task process to its agent (task::StepReport) and, as
// the job's running Progress, from the coordinator to the CLI. Each field
// is paired with its wire field here, once, for both messages; the worker
// and the CLI map through these and name no field themselves.
#pragma once

#include <cmath>

#include "engine/train/progress.h"
#include "proto/mixtrain.pb.h"
#include "proto/task_process.pb.h"

namespace mixtrain::v1 {

// The step's own values (not the per-rank figures, the gradient range or
// the fp8 statistics, which the report carries beside them).
inline void step_to_report(const StepProgress& step, task::StepReport& out) {
  out.set_step(step.step);
  out.set_steps(step.steps);
  out.set_loss(step.loss);
  out.set_loss_scale(step.loss_scale);
  out.set_lr(step.lr);
  out.set_grad_norm(step.grad_norm);
  out.set_tokens_per_second(step.tokens_per_second);
  out.set_skipped(step.skipped);
  out.set_nonfinite_kind(step.nonfinite_kind);
  out.set_nonfinite_where(step.nonfinite_where);
  out.set_seconds(step.seconds);
  out.set_tokens(step.tokens);
}

inline StepProgress step_from_report(const task::StepReport& in) {
  StepProgress step;
  step.step = in.step();
  step.steps = in.steps();
  step.loss = in.loss();
  step.loss_scale = in.loss_scale();
  step.lr = in.lr();
  step.grad_norm = in.grad_norm();
  step.tokens_per_second = in.tokens_per_second();
  step.skipped = in.skipped();
  step.nonfinite_kind = in.nonfinite_kind();
  step.nonfinite_where = in.nonfinite_where();
  step.seconds = in.seconds();
  step.tokens = in.tokens();
  return step;
}

// What the job's Progress keeps of its latest step. A skipped step keeps
// the last finite loss and gradient norm (and the caller counts it in
// overflow_steps).
inline void step_to_progress(const StepProgress& step, Progress& out) {
  out.set_step(step.step);
  out.set_steps(step.steps);
  if (std::isfinite(step.loss)) out.set_train_loss(step.loss);
  out.set_loss_scale(step.loss_scale);
  out.set_tokens_per_second(step.tokens_per_second);
  out.set_learning_rate(step.lr);
  if (!step.skipped) out.set_grad_norm(step.grad_norm);
}

// The latest step as the job's Progress tells it.
inline StepProgress step_from_progress(const Progress& in) {
  StepProgress step;
  step.step = in.step();
  step.steps = in.steps();
  step.loss = in.train_loss();
  step.loss_scale = in.loss_scale();
  step.lr = in.learning_rate();
  step.grad_norm = in.grad_norm();
  step.tokens_per_second = in.tokens_per_second();
  return step;
}

}  // namespace mixtrain::v1
