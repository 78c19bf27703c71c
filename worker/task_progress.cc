// Why: see task_progress.h.
#include "worker/task_progress.h"

#include "proto/step_progress.h"

namespace mixtrain::worker {

void TaskProgress::on_step(const StepProgress& step) {
  progress_.clear_eval_batches_done();
  progress_.clear_eval_batches();
  v1::step_to_progress(step, progress_);
  if (step.skipped) progress_.set_overflow_steps(progress_.overflow_steps() + 1);
}

void TaskProgress::on_eval(const EvalProgress& eval) {
  if (std::isfinite(eval.val_loss)) progress_.set_val_loss(eval.val_loss);
  progress_.clear_eval_batches_done();
  progress_.clear_eval_batches();
}

void TaskProgress::on_eval_batch(const EvalBatchProgress& eval_batch) {
  progress_.set_eval_batches_done(eval_batch.done);
  progress_.set_eval_batches(eval_batch.batches);
}

void TaskProgress::on_summary(const TrainSummary& summary) {
  if (summary.steps <= progress_.step()) return;  // the steps said it all
  progress_.set_step(summary.steps);
  if (summary.final_train_loss) progress_.set_train_loss(*summary.final_train_loss);
  if (summary.final_val_loss) progress_.set_val_loss(*summary.final_val_loss);
  progress_.set_loss_scale(summary.loss_scale);
}

}  // namespace mixtrain::worker
