// Why: the coordinator's Progress message (what `mixtrain status` and the
// job's progress line show) is a running total across steps and
// evaluations: the last loss, the validation loss of the last evaluation,
// the count of skipped steps. This accumulates it from a task's reports.
#pragma once

#include "mixtrain.pb.h"
#include "train/progress.h"

namespace mixtrain::worker {

class TaskProgress {
 public:
  // Takes one step's values; counts it as an overflow step when skipped.
  void on_step(const StepProgress& step);
  // Takes an evaluation's validation loss.
  void on_eval(const EvalProgress& eval);
  // Everything so far.
  const v1::Progress& progress() const { return progress_; }

 private:
  v1::Progress progress_;
};

}  // namespace mixtrain::worker
