// Why: the coordinator's Progress message (what `mixtrain status` and the
// job's progress line show) is a running total across steps and
// evaluations: the last loss, the validation loss of the last evaluation,
// the count of skipped steps. This accumulates it from a task's reports,
// and completes it from the task's summary: a task resumed from its final
// checkpoint runs no step, and its job showed progress 0/N (issue 13).
#pragma once

#include "engine/train/progress.h"
#include "engine/train/train_summary.h"
#include "proto/mixtrain.pb.h"

namespace mixtrain::worker {

class TaskProgress {
 public:
  // Takes one step's values; counts it as an overflow step when skipped.
  void on_step(const StepProgress& step);
  // Takes an evaluation's validation loss.
  void on_eval(const EvalProgress& eval);
  // Takes how far the evaluation under way is (cleared by the next step
  // or the evaluation's end).
  void on_eval_batch(const EvalBatchProgress& eval_batch);
  // Takes what the task's summary says of its end (steps, losses, loss
  // scale) where no step reported more.
  void on_summary(const TrainSummary& summary);
  // Everything so far.
  const v1::Progress& progress() const { return progress_; }

 private:
  v1::Progress progress_;
};

}  // namespace mixtrain::worker
