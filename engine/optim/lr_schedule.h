// Why: the learning rate of each step, as llm.c's train_gpt2 and nanoGPT
// compute it (linear warmup, then cosine decay to min_lr), so that runs
// compared against them see the same rate at the same step.
//
// Steps are numbered from 0 (the first optimizer step is step 0), W =
// warmup_steps, S = total_steps:
//   s <  W:      lr * (s + 1) / W                      (reaches lr at s = W-1)
//   W <= s < S:  min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr),
//                r = (s - W) / (S - W)                  (lr at s = W)
//   s >= S:      min_lr                                 (nanoGPT past lr_decay_iters)
// llm.c uses exactly the first two lines (its train_num_batches is S).
#pragma once

#include <cstdint>

namespace mixtrain {

struct LrScheduleConfig {
  double lr = 6e-4;            // peak rate, job spec train.lr
  double min_lr = 6e-5;        // final rate, train.min_lr
  int64_t warmup_steps = 0;    // train.warmup_steps
  int64_t total_steps = 1;     // train.steps
};

class LrSchedule {
 public:
  // Throws EngineError(kInvalidArgument) naming the job-spec key unless lr
  // is finite and >= 0, 0 <= min_lr <= lr, total_steps >= 1 and
  // 0 <= warmup_steps <= total_steps.
  explicit LrSchedule(const LrScheduleConfig& config);

  // The learning rate of 0-based `step` (formula in the file comment).
  // Throws EngineError(kInvalidArgument) for a negative step.
  double lr_at(int64_t step) const;

 private:
  LrScheduleConfig config_;
};

}  // namespace mixtrain
